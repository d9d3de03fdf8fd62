"""Smoke test of bench/mlflow_large_artifact.py: a small file through the real MLflow client
into Troupe whole and in parts, each download checked by its SHA-256 in the bench itself."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_large_artifact_bench_sends_a_file_whole_and_in_parts(postgres_url):
    result = subprocess.run(
        [sys.executable, "bench/mlflow_large_artifact.py", "--smoke", "--postgres", postgres_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    for way in ("whole", "multipart"):
        assert summary[way]["upload_mib_s"] > 0 and summary[way]["download_mib_s"] > 0
        assert summary[way]["worker_peak_growth_mib"] < summary["file_mib"] * 4
