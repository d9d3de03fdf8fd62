"""A short training run with `rollout_engine: vllm`, real vLLM on the CPU.

voting, per_role, LoRA, on a random tiny-m-shaped local model: the step's log-prob gap and
the engine's start-up and weight-sync times are logged, every role puts a gradient on its
policy, checkpoints are written; a cancelled run stops its engine, and resuming it starts a
new engine and logs each step once.
"""

from __future__ import annotations

import pytest

from tests.trainer.test_train import with_reward_spread
from tests.trainer.vllm_helpers import engine_processes, require_vllm, tiny_m_chat_dir
from trainer.config import make_config
from trainer.reporting import ListReporter
from trainer.train import train

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_vllm_run_logs_the_gap_checkpoints_and_resumes_after_a_cancel(tmp_path, monkeypatch):
    require_vllm()
    with_reward_spread(monkeypatch)  # every (problem, role) group has a reward spread
    model = tiny_m_chat_dir(tmp_path / "model")
    config = make_config(
        "cpu-demo",
        model=str(model),
        rollout_engine="vllm",
        workflow="voting",
        sharing="per_role",
        steps=3,
        prompts_per_step=2,
        group_size=4,
        eval_problems=2,
        eval_samples=1,
        eval_every=3,
        checkpoint_every=1,
        max_new_tokens=8,
    )
    out = tmp_path / "run"
    first = ListReporter(stop_after=1)
    assert train(config, out, first)["status"] == "cancelled"
    assert engine_processes(out) == []  # the cancelled run stopped its engine
    keys = first.keys()
    assert {
        "train/rollout_logp_gap",
        "train/rollout_logp_gap_max",
        "sys/engine_startup_seconds",
        "sys/engine_sync_seconds",
        "role/generator/grad_norm",
        "role/aggregator/grad_norm",
    } <= keys
    (_, gap) = first.series("train/rollout_logp_gap")
    assert 0 <= gap[0] < 1e-4  # fp32 on the CPU: vLLM's log-probs are the trainer's
    assert first.series("sys/engine_startup_seconds")[1][0] > 0
    assert [step for step, _ in first.checkpoints] == [1]
    assert any(line.startswith("vLLM rollout engine started in") for line in first.lines)

    second = ListReporter()
    assert train(config, out, second)["status"] == "succeeded"
    assert engine_processes(out) == []
    steps, _ = second.series("train/reward")
    assert steps == [2, 3]  # resumed after step 1: no step logged twice
    assert [step for step, _ in second.checkpoints] == [2, 3]
    assert "eval/accuracy" in second.keys()
