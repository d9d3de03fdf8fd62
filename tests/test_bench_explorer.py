"""bench/explorer.py still runs (`--smoke --json`: 200 runs × 10 keys on SQLite) and its
answer has every query's time, matches and the plan of its metric-filter page query: a
search of the points' primary key, never a scan of their table."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


def test_the_explorer_bench_times_every_query_with_its_plan():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "explorer.py"), "--smoke", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])["sqlite"]
    for name in ("newest", "metric filter", "verdicts", "sort by max"):
        assert result[name] > 0
    assert result["newest (matches)"] == 200
    assert result["metric filter (matches)"] > 0
    # each metric read searches the points' primary key; no line scans the points' table
    plan = result["plan"]
    assert "metricpoint_1 (run_id=? AND key=?)" in plan
    assert not [line for line in plan.splitlines() if "SCAN" in line and "metricpoint" in line]
