"""Smoke test of bench/mlflow_endpoint.py: the tiny workload through the real MLflow client
against Troupe's MLflow endpoint (and MLflow's own server where its venv is installed)."""

import json
import os
import subprocess
import sys

import pytest

from bench.common import mlflow_available
from tests.helpers import ROOT

MLFLOW_PYTHON = os.environ.get("MLFLOW_PYTHON", "/tmp/mlflow-venv/bin/python")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run_smoke(*args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "bench/mlflow_endpoint.py", "--smoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_endpoint_bench_runs_troupes_side_alone(postgres_url):
    summary = run_smoke("--postgres", postgres_url, "--without-mlflow")
    assert summary["troupe"]["points_per_s_median"] > 0
    assert len(summary["troupe"]["history_s_each"]) == 2
    assert "mlflow" not in summary


def test_the_endpoint_bench_compares_with_mlflow_where_it_is_installed(postgres_url):
    if not mlflow_available(MLFLOW_PYTHON):  # its venv, with mlflow and psycopg2
        pytest.skip(f"no MLflow venv at {MLFLOW_PYTHON} (see bench/tracking_vs_mlflow.py)")
    summary = run_smoke("--postgres", postgres_url, "--mlflow-python", MLFLOW_PYTHON)
    assert summary["ratio_points_per_s"] > 0 and summary["ratio_history"] > 0
