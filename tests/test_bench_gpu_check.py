"""bench/gpu_check.py still runs: CI runs it on the CPU with a tiny shape, so the
script the GPU node runs cannot rot between GPU sessions."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_the_gpu_check_runs_on_the_cpu_and_every_policy_moves():
    args = ["--device", "cpu", "--steps", "1", "--new-tokens", "4", "--micro-batch", "4"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=590,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("tiny:")]
    cases = {tuple(r[0].split(":")[1:4]) for r in rows}
    assert cases == {
        (f, s, w)
        for f in ("lora", "full")
        for s in ("shared", "per_role")
        for w in ("single", "voting")
    }
    assert all(r[-2:] == ["yes", "yes"] for r in rows)  # parameters moved, loss finite
    sampler = [line for line in done.stdout.splitlines() if line.startswith("sampler ")]
    assert len(sampler) == 1 and "'same_tokens': '8/8'" in sampler[0]


def test_a_malformed_case_is_named():
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gpu_check.py"),
            "--device",
            "cpu",
            "--cases",
            "tiny:lora:shared",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "case 'tiny:lora:shared': expected shape:finetune:sharing:workflow:PROMPTSxGROUP" in (
        done.stderr
    )
