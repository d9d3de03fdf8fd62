"""bench/gpu_check.py still runs: CI runs it on the CPU with a tiny shape, so the
script the GPU node runs cannot rot between GPU sessions."""

import ast
import json
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


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["packing", "passes", "logprobs", "kernels"])
def test_each_comparison_runs_on_the_cpu_and_both_sides_agree(kind):
    args = ["--device", "cpu", "--steps", "1", "--new-tokens", "4", "--no-sampler-check"]
    args += ["--kernels", "compile"] if kind == "kernels" else []  # Liger's need CUDA
    case = "tiny:lora:per_role:voting:2x2"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), *args, f"--compare-{kind}"]
        + ["--micro-batch-tokens", "256", "--cases", case],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=590,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith(f"{kind} ")]
    assert len(rows) == 1, done.stdout
    row = ast.literal_eval(rows[0].removeprefix(f"{kind} "))
    assert row["case"] == case and row["speedup"] > 0
    assert row["loss_gap"] < 1e-5  # the same update by either path


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


@pytest.mark.timeout(900)
def test_the_study_dry_run_times_every_phase_and_trl_beside(tmp_path):
    """`--study` on the CPU: one study case (tiny shape) with its five phases timed, and TRL's
    single-agent step with the same tokens in the same run."""
    out = tmp_path / "study.json"
    args = [
        *("--device", "cpu", "--study", "--cases", "tiny:lora:per_role:voting:2x2"),
        *("--steps", "1", "--new-tokens", "4", "--micro-batch-tokens", "256"),
        *("--eval-problems", "2", "--budget-s", "850", "--no-sampler-check", "--json", str(out)),
    ]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(out.read_text())
    (case,) = report["cases"]
    assert case["status"] == "ok" and case["moved"] and case["finite"]
    assert set(case["phases_s"]) == {"rollout", "scoring", "update", "evaluation", "checkpoint"}
    assert all(v >= 0 for v in case["phases_s"].values())
    assert case["micro_batch_tokens"] == 256  # the update packed
    (trl,) = report["trl"]
    assert trl["status"] == "ok", trl
    # The single-agent equivalent asks for what the case generated: 2 x 2 episodes x 4 turns
    # of 4 tokens (TRL's side may stop a completion early at an end token).
    assert case["generated_tokens"] == 2 * 2 * 4 * 4
    assert trl["sequences"] * trl["new_tokens"] == case["generated_tokens"]
    assert 0 < trl["tokens"] <= case["generated_tokens"]
    assert trl["case_vs_trl"] == pytest.approx(case["step_s"] / trl["trl_step_s"])
    assert "per phase" in done.stdout and "TRL, single-agent, same tokens" in done.stdout
