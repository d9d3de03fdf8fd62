"""bench/sandbox_overhead.py still runs (a tiny workload)."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.timeout(120)


def test_the_sandbox_bench_times_both_designs():
    done = subprocess.run(
        [sys.executable, "bench/sandbox_overhead.py", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr
    assert "| checker |" in done.stdout and "| single process |" in done.stdout
    assert "ratio checker / single process:" in done.stdout
