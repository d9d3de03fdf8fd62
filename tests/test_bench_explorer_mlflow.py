"""bench/explorer_mlflow.py still runs: a few runs loaded into MLflow's server and Troupe's
through the real MLflow client, each query's first page timed on both (and the same runs come
back from both, in the same order), and the explorer's timing of the same filters. Needs
MLflow's own venv (`/tmp/mlflow-venv`, as the bench's docstring sets it up); skipped without."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import mlflow_available
from tests.helpers import ROOT

pytestmark = pytest.mark.slow

MLFLOW_PYTHON = Path("/tmp/mlflow-venv/bin/python")


@pytest.mark.skipif(
    not mlflow_available(str(MLFLOW_PYTHON)), reason="no MLflow venv at /tmp/mlflow-venv"
)
def test_the_bench_searches_both_servers_for_the_same_runs():
    command = [sys.executable, str(ROOT / "bench" / "explorer_mlflow.py")]
    command += ["--mlflow-python", str(MLFLOW_PYTHON), "--runs", "20", "--repeats", "1", "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["result"]["runs"] == 20
    for name, query in out["result"]["queries"].items():
        assert query["same_first_page"], name
        assert query["a_median_s"] > 0 and query["b_median_s"] > 0
        assert out["explorer"][name]["median_s"] > 0
    # every run is on the newest page of both; the filters keep fewer
    assert out["result"]["queries"]["newest"]["matches_on_page"] == [20, 20]
    assert out["explorer"]["newest"]["total"] == 20
