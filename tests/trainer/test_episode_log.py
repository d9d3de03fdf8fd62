"""Recording episodes: each training step keeps whole GRPO groups, each evaluation the same
probe problems, with the rewards and advantages the trainer used; texts are made safe."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.trainer.quick import small
from trainer.episode import Episode, Turn
from trainer.episode_log import MAX_TEXT_CHARS, episode_record, flagged_beyond, safe_text
from trainer.reporting import JsonlReporter, ListReporter
from trainer.train import train


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[ListReporter, object]:
    config = small(
        workflow="voting",
        steps=2,
        eval_every=2,
        prompts_per_step=3,
        group_size=4,
        episodes_per_step=2,
        episodes_probe=3,
        eval_samples=2,
        episodes_grad_share=True,
    )
    reporter = ListReporter()
    train(config, tmp_path_factory.mktemp("run"), reporter)
    return reporter, config


def test_each_step_records_the_whole_groups_of_its_first_problems(recorded):
    reporter, config = recorded
    train_eps = [r for r in reporter.episodes if r["kind"] == "train"]
    assert sorted({r["step"] for r in train_eps}) == [1, 2]
    for step in (1, 2):
        mine = [r for r in train_eps if r["step"] == step]
        assert [r["index"] for r in mine] == list(range(2 * 4))
        assert [r["sample"] for r in mine] == [0, 1, 2, 3] * 2
        assert len({r["problem_id"] for r in mine}) <= 2


def test_recorded_advantages_are_the_group_normalised_rewards(recorded):
    reporter, config = recorded
    mine = [r for r in reporter.episodes if r["kind"] == "train" and r["step"] == 1]
    for first in range(0, len(mine), config.group_size):
        group = mine[first : first + config.group_size]
        # broadcast rewards, groups keyed by (problem, role): every aggregator turn of a
        # group carries the episode's reward, its advantage is (r - mean) / (std + eps)
        rewards = [ep["reward"] for ep in group]
        assert [t["reward"] for ep in group for t in ep["turns"]] == [
            ep["reward"] for ep in group for _ in ep["turns"]
        ]
        mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
        for ep in group:
            aggregator = next(t for t in ep["turns"] if t["role"] == "aggregator")
            if std == 0:
                assert aggregator["advantage"] == 0.0
            else:
                assert aggregator["advantage"] == pytest.approx(
                    (ep["reward"] - mean) / (std + 1e-4), abs=1e-3
                )
            assert ep["correct"] == (ep["reward"] == 1.0)


def test_every_evaluation_records_the_same_probe_problems(recorded):
    reporter, config = recorded
    evals = [r for r in reporter.episodes if r["kind"] == "eval"]
    assert sorted({r["step"] for r in evals}) == [0, 2]
    problems = {
        step: [(r["problem_id"], r["sample"]) for r in evals if r["step"] == step]
        for step in (0, 2)
    }
    assert problems[0] == problems[2]
    assert len(problems[0]) == 3 * 2


def test_turns_carry_text_tokens_and_logprobs(recorded):
    reporter, _ = recorded
    turn = reporter.episodes[0]["turns"][0]
    assert turn["role"] == "generator" and turn["policy"] == "shared"
    assert turn["prompt"] and turn["completion_tokens"] > 0 and turn["prompt_tokens"] > 0
    assert turn["logprob_mean"] < 0
    keys = reporter.keys()
    assert {"behav/voter_agreement", "role/generator/trunc_frac"} <= keys


def test_zero_turns_recording_off(tmp_path):
    reporter = ListReporter()
    train(small(steps=1, episodes_per_step=0, episodes_probe=0), tmp_path, reporter)
    assert reporter.episodes == []


def test_texts_are_made_safe_and_cut():
    assert safe_text("a\x00b\udc80c") == "a\ufffdb?c"
    long = safe_text("x" * (MAX_TEXT_CHARS + 5))
    assert long.startswith("x" * MAX_TEXT_CHARS)
    assert long.endswith("[5 more characters not recorded]")
    turn = Turn("solver", "solver", "shared", 0, [1], [], [], text="<b>hi</b>")
    ep = Episode(problem_id="p", sample=0, turns=[turn], reward=float("nan"))
    record = episode_record(ep, index=0, kind="train", step=1, decode=lambda ids: "\ud800")
    assert record["reward"] is None and record["turns"][0]["logprob_mean"] is None
    assert record["turns"][0]["prompt"] == "?"
    assert record["turns"][0]["completion"] == "<b>hi</b>"  # stored as is, escaped when shown


def test_the_cli_writes_episodes_jsonl_and_a_resume_drops_those_past_its_checkpoint(tmp_path):
    reporter = JsonlReporter(tmp_path / "metrics.jsonl")
    for step in (0, 1, 2):
        reporter.log_episodes(step, [{"kind": "train", "step": step, "index": 0}])
    reporter.truncate_after(1)
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1]


def test_training_episodes_carry_their_share_of_each_roles_gradient(recorded):
    # trainer/grad_drill.py: a share per role the episode's turns had; the recorded 2 of 3
    # problems' groups are a sample, their shares a part of the 1 that all episodes sum to.
    # A role whose whole gradient is zero at a step (every advantage 0) has no share.
    reporter, _ = recorded
    train_eps = [r for r in reporter.episodes if r["kind"] == "train"]
    assert train_eps and all(set(r["grad_share"]) <= {"generator", "aggregator"} for r in train_eps)
    assert all(isinstance(v, float) for r in train_eps for v in r["grad_share"].values())
    assert all("grad_share" not in r for r in reporter.episodes if r["kind"] == "eval")


def test_no_gradient_shares_unless_asked(tmp_path):
    reporter = ListReporter()
    train(small(steps=1, episodes_per_step=1), tmp_path, reporter)
    assert reporter.episodes and all("grad_share" not in r for r in reporter.episodes)


def test_a_step_with_a_verdict_disagreement_logs_it_and_records_the_episode(tmp_path, monkeypatch):
    # A verifier hole nobody has found yet, simulated: every program passes the checker. The
    # second opinion fails the wrong ones, the step logs how many, and every flagged episode
    # is recorded, even outside the recorded sample.
    from trainer.tasks.code import CodeTask

    monkeypatch.setattr(CodeTask, "score_many", lambda self, problems, texts: [1.0] * len(texts))
    config = small(task="code", steps=1, eval_every=1, prompts_per_step=4, episodes_per_step=1)
    reporter = ListReporter()
    train(config, tmp_path, reporter)
    logged = [v for _, key, v in reporter.points if key == "sandbox/verdict_disagreements"]
    assert logged and logged[0] >= 1
    # Per role too: the share of the role's re-checked answers the re-check failed.
    rates = {key: v for _, key, v in reporter.points if key.endswith("/verdict_disagreement_rate")}
    assert set(rates) == {f"role/{role}/verdict_disagreement_rate" for role in config.roles}
    assert all(0.0 < v <= 1.0 for v in rates.values())
    flagged = [r for r in reporter.episodes if r.get("verdict_disagreement")]
    assert flagged and all(r["kind"] in ("train", "eval") for r in flagged)
    train_eps = [r for r in reporter.episodes if r["kind"] == "train"]
    indices = [r["index"] for r in train_eps]
    assert len(indices) == len(set(indices))


def test_a_record_says_so_only_when_the_recheck_disagreed():
    ep = Episode("p", 0, answer="x", reward=1.0)
    assert "verdict_disagreement" not in episode_record(
        ep, index=0, kind="train", step=1, decode=str
    )
    ep.verdict_disagreement = True
    assert episode_record(ep, index=0, kind="train", step=1, decode=str)["verdict_disagreement"]
    kept, other = Episode("a", 0), Episode("b", 0, verdict_disagreement=True)
    assert flagged_beyond([kept], [kept, other, Episode("c", 0)]) == [other]
