"""The training loop end to end on the tiny model: metrics, cancellation, exact resume, CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import trainer.train
from tests.trainer.quick import small
from tests.trainer.test_kernels import count_compiled_calls
from trainer.config import ConfigError, make_config
from trainer.reporting import ListReporter, read_metrics_jsonl
from trainer.train import train


def _without_sys(points):
    return sorted((s, k, round(v, 6)) for s, k, v in points if not k.startswith("sys/"))


def test_voting_per_agent_logs_every_metric_family(tmp_path):
    config = small(workflow="voting", sharing="per_agent", steps=2, kl_beta=0.01)
    reporter = ListReporter()
    assert train(config, tmp_path, reporter)["status"] == "succeeded"
    keys = reporter.keys()
    expected = {
        "eval/accuracy",
        "eval/accuracy/generator",
        "eval/accuracy/aggregator",
        "train/reward",
        "train/reward_std",
        "train/frac_zero_std",
        "train/resp_len",
        "train/kl",
        "train/entropy",
        "train/clip_frac",
        "train/loss",
        "agent/generator0/grad_norm",
        "policy/generator0/grad_norm",
        "policy/aggregator/lr",
        "sys/step_seconds",
        "sys/tokens_per_second",
        "sys/peak_memory_mb",
    }
    for role in ("generator", "aggregator"):
        # no grad_share: under per_agent no two roles share a policy (see the shared test)
        for name in (
            "grad_norm",
            "entropy",
            "kl",
            "tokens",
            "resp_len",
            "opt_steps",
            "pg_loss",
            "clip_frac",
        ):
            expected.add(f"role/{role}/{name}")
    assert expected <= keys, sorted(expected - keys)
    steps, values = reporter.series("eval/accuracy")
    assert steps == [0, 2]


def with_reward_spread(monkeypatch) -> None:
    """Score every other rollout of each problem correct, whatever the model wrote.

    Per-role gradients exist only where a GRPO group's rewards differ; with the model's own
    rewards that depends on its exact warm-started weights (and so on thread counts and
    load). This makes every (problem, role) group carry a spread, so each role puts a
    gradient on its policy by construction.
    """
    sampled = trainer.train.rollout

    def rollout(*args, **kwargs):
        episodes, stats = sampled(*args, **kwargs)
        for episode in episodes:
            episode.reward = float(episode.sample % 2)
            for turn in episode.turns:
                turn.score = None  # no per-role score either: every turn gets the reward
        return episodes, stats

    monkeypatch.setattr(trainer.train, "rollout", rollout)


def test_shared_policy_logs_per_role_shares_that_sum_to_one(tmp_path, monkeypatch):
    with_reward_spread(monkeypatch)
    reporter = ListReporter()
    config = small(workflow="voting", sharing="shared", steps=1, prompts_per_step=2, group_size=4)
    train(config, tmp_path, reporter)
    assert reporter.series("train/frac_zero_std") == ([1], [0.0])  # the spread is in place
    shares = {k: v for s, k, v in reporter.points if k.endswith("/grad_share") and s == 1}
    assert set(shares) == {"role/generator/grad_share", "role/aggregator/grad_share"}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(0 < share < 1 for share in shares.values())
    keys = reporter.keys()
    assert {"grad_cos/aggregator|generator", "grad_cos/generator0|generator1"} <= keys


def test_the_logged_reward_statistics_are_those_of_the_steps_episodes(tmp_path, monkeypatch):
    with_reward_spread(monkeypatch)
    reporter = ListReporter()
    train(small(workflow="single", steps=1, prompts_per_step=2, group_size=4), tmp_path, reporter)
    # 8 episodes, every other one right: mean 1/2 and unbiased std sqrt(2/7), as
    # trainer.advantages.reward_stats defines them (not the population std, 1/2, nor the
    # mean within-group std, sqrt(1/3))
    assert reporter.series("train/reward") == ([1], [0.5])
    assert reporter.series("train/reward_std") == ([1], [pytest.approx(math.sqrt(2 / 7))])


def test_cancel_stops_within_a_step_and_leaves_a_checkpoint(tmp_path):
    reporter = ListReporter(stop_after=1)
    result = train(small(), tmp_path, reporter)
    assert result == {**result, "status": "cancelled", "step": 1}
    assert [step for step, _ in reporter.checkpoints] == [1]


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path):
    config = small(workflow="voting", sharing="per_role", checkpoint_every=1)
    full = ListReporter()
    train(config, tmp_path / "full", full)

    first = ListReporter(stop_after=2)
    assert train(config, tmp_path / "split", first)["status"] == "cancelled"
    second = ListReporter()
    assert train(config, tmp_path / "split", second)["status"] == "succeeded"
    assert min(s for s, _, _ in second.points) == 3  # nothing before the checkpoint again
    assert _without_sys(first.points + second.points) == _without_sys(full.points)


def test_a_run_dir_with_another_config_is_refused(tmp_path):
    train(small(steps=1), tmp_path, ListReporter())
    with pytest.raises(ValueError, match="different config"):
        train(small(steps=1, lr=0.01), tmp_path, ListReporter())


def _cli(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args], capture_output=True, text=True, timeout=600, **kw
    )


def test_cli_rejects_a_bad_flag_with_one_line_naming_the_field():
    done = _cli("run", "--preset", "cpu-demo", "--workflow", "votes", "--out", "/tmp/never")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --workflow: 'votes' is not one of single, voting, eval_opt, orch_workers"
    ]


def test_cli_run_writes_metrics_and_resumes_without_duplicates(tmp_path):
    flags = [
        "--preset",
        "cpu-demo",
        "--steps",
        "2",
        "--prompts-per-step",
        "2",
        "--group-size",
        "2",
        "--eval-problems",
        "8",
        "--eval-every",
        "1",
        "--checkpoint-every",
        "1",
        "--out",
        str(tmp_path),
    ]
    done = _cli("run", *flags)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "succeeded"
    assert json.loads((tmp_path / "config.json").read_text())["steps"] == 2
    # Pretend the run died after step 1: drop the step-2 checkpoint and run again.
    import shutil

    shutil.rmtree(tmp_path / "checkpoints" / "step-000002")
    assert _cli("run", *flags).returncode == 0
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    pairs = [(p["key"], p["step"]) for p in lines]
    assert len(pairs) == len(set(pairs))
    assert read_metrics_jsonl(tmp_path / "metrics.jsonl")["eval/accuracy"][0] == [0, 1, 2]


def test_cli_eval_prints_one_json_object():
    done = _cli("eval", "--preset", "cpu-demo", "--workflow", "voting", "--problems", "8")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) >= {"accuracy", "episodes", "turns", "tokens", "seconds"}
    k = make_config("cpu-demo").eval_samples  # samples per problem
    assert result["episodes"] == 8 * k and result["turns"] == 8 * k * 4


def test_an_auto_token_budget_with_batched_adapters_trains_and_logs_what_it_resolved(tmp_path):
    config = small(
        workflow="voting", sharing="per_role", steps=1, micro_batch_tokens=-1, batch_adapters=True
    )
    reporter = ListReporter()
    assert train(config, tmp_path, reporter)["status"] == "succeeded"
    assert reporter.series("sys/token_budget") == ([1], [16384.0])  # the CPU's default
    assert {"role/generator/grad_norm", "role/aggregator/grad_norm"} <= reporter.keys()
    plain = ListReporter()
    train(small(workflow="voting", sharing="per_role", steps=1), tmp_path / "plain", plain)
    assert "sys/token_budget" not in plain.keys()


@pytest.mark.timeout(900)
def test_a_run_with_compiled_layers_and_fused_logprobs_trains_as_the_exact_one(
    tmp_path, monkeypatch
):
    # The first step's rollout is the same (generation stays eager); its update, through the
    # compiled layers (gradient checkpointing's recompute too) and Liger's chunked log-probs,
    # gives the exact update's figures up to rounding.
    options = dict(workflow="voting", sharing="per_role", steps=1, grad_checkpointing="on")
    runs = {}
    for name, extra in (("exact", {}), ("fast", dict(kernels="compile", fused_logprobs=True))):
        calls = count_compiled_calls(monkeypatch)
        reporter = ListReporter()
        assert train(small(**options, **extra), tmp_path / name, reporter)["status"] == "succeeded"
        runs[name] = {k: reporter.series(k)[1][0] for k in reporter.keys() if "grad_norm" in k}
        assert bool(calls) == (name == "fast")  # compiled or not
    assert runs["fast"].keys() == runs["exact"].keys() and runs["exact"]
    for key, value in runs["exact"].items():
        assert runs["fast"][key] == pytest.approx(value, rel=1e-4), key


def test_liger_kernels_on_the_cpu_are_refused_by_name():
    with pytest.raises(ConfigError) as error:
        make_config(kernels="liger", device="cpu")
    assert "CUDA only" in error.value.errors["kernels"]


def test_lora_targets_no_qwen3_layer_has_are_refused_by_name():
    """Once accepted, then failed on the worker with peft's NoMatchingPeftModuleError."""
    with pytest.raises(ConfigError) as error:
        make_config("cpu-demo", lora_targets="q_proj, qproj")
    assert error.value.errors["lora_targets"].startswith("qproj: no such layer in tiny-s")
    for fine in ("q_proj,v_proj", "model.layers.0.mlp.down_proj", "all-linear", "embed_tokens"):
        assert make_config("cpu-demo", lora_targets=fine).lora_targets == fine
    assert make_config("cpu-demo", model="./other", lora_targets="qproj")  # peft's to check
    assert make_config("cpu-demo", model="Qwen/Qwen3-30B-A3B", lora_targets="gate")  # MoE


def test_a_learning_rate_above_one_is_refused():
    """lr 1e308 was queued, and its run went non-finite at the first step."""
    with pytest.raises(ConfigError) as error:
        make_config("cpu-demo", lr=1e308)
    assert error.value.errors["lr"] == "1e+308 must be at most 1.0"
