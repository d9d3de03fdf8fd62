"""Behaviour metrics on hand-built episodes equal the values counted by hand."""

from __future__ import annotations

import pytest

from trainer.behaviour import add_counts, behaviour_counts, behaviour_metrics, from_counts
from trainer.episode import Episode, Turn
from trainer.tasks.math import extract_boxed
from vocabulary.names import BEHAVIOUR_KEYS, TRUNC_FRAC, role_key


def turn(role: str, text: str = "", *, agent: str = "", score=None, truncated=False) -> Turn:
    return Turn(
        role=role,
        agent=agent or role,
        policy="shared",
        stage=0,
        prompt_ids=[1],
        completion_ids=[2, 3],
        logprobs=[-0.5, -1.5],
        text=text,
        score=score,
        truncated=truncated,
    )


def eval_opt(*rounds: tuple[bool, bool | None]) -> Episode:
    """Rounds of (candidate correct, verdict accepted); None: the last proposal, unjudged.
    The scores are what the rollout gives: a verdict scores 1 when it is right."""
    ep = Episode(problem_id="p", sample=0)
    for correct, accepted in rounds:
        ep.turns.append(turn("generator", score=float(correct)))
        if accepted is not None:
            ep.turns.append(turn("evaluator", score=float(accepted == correct)))
    return ep


def voting(voters: list[str], final: str | None) -> Episode:
    ep = Episode(problem_id="p", sample=0, answer=final)
    for i, answer in enumerate(voters):
        ep.turns.append(turn("generator", f"so \\boxed{{{answer}}}", agent=f"generator{i}"))
    ep.turns.append(turn("aggregator", final or ""))
    return ep


def test_evaluator_calibration_is_the_accept_rate_on_correct_and_on_wrong_candidates():
    episodes = [
        eval_opt((False, True)),  # accepted a wrong one
        eval_opt((False, False), (True, True), (True, None)),  # rejected wrong, accepted right
        eval_opt((True, False), (False, False), (False, None)),  # rejected right, rejected wrong
    ]
    metrics = behaviour_metrics(episodes, extract_boxed)
    # correct candidates judged: accepted 1 of 2; wrong ones: accepted 1 of 3
    assert metrics["behav/evaluator_accept_correct"] == pytest.approx(1 / 2)
    assert metrics["behav/evaluator_accept_wrong"] == pytest.approx(1 / 3)
    assert "behav/voter_agreement" not in metrics


def test_voter_agreement_and_following_the_majority_are_counted_per_episode():
    episodes = [
        voting(["4", "4", "4"], "\\boxed{4}"),  # agree, majority 4, followed
        voting(["4", "4", "5"], "\\boxed{5}"),  # disagree, majority 4, not followed
        voting(["1", "2", "3"], "\\boxed{1}"),  # disagree, no majority: not counted
        voting(["7", "7", "3"], "\\boxed{7}"),  # disagree, majority 7, followed
    ]
    metrics = behaviour_metrics(episodes, extract_boxed)
    assert metrics["behav/voter_agreement"] == pytest.approx(1 / 4)
    assert metrics["behav/aggregator_follows_majority"] == pytest.approx(2 / 3)


def test_voters_without_an_answer_agree_with_nobody():
    ep = voting([], "")
    ep.turns[:0] = [turn("generator", "no idea"), turn("generator", "none")]
    metrics = behaviour_metrics([ep], extract_boxed)
    assert metrics["behav/voter_agreement"] == 0.0
    assert "behav/aggregator_follows_majority" not in metrics


def test_orchestrator_subtasks_and_truncation_are_per_role_means():
    plan = lambda workers: Episode(  # noqa: E731
        problem_id="p",
        sample=0,
        turns=[
            turn("orchestrator", truncated=workers == 0),
            *[turn("worker", truncated=i == 0) for i in range(workers)],
            turn("synthesizer"),
        ],
    )
    metrics = behaviour_metrics([plan(3), plan(0), plan(2)], extract_boxed)
    assert metrics["behav/orchestrator_subtasks"] == pytest.approx(5 / 3)
    assert metrics["role/orchestrator/trunc_frac"] == pytest.approx(1 / 3)
    assert metrics["role/worker/trunc_frac"] == pytest.approx(2 / 5)
    assert metrics["role/synthesizer/trunc_frac"] == 0.0


def test_counts_summed_over_ranks_give_the_metrics_of_all_episodes():
    episodes = [
        voting(["4", "4", "4"], "\\boxed{4}"),
        eval_opt((False, True), (True, True)),
        voting(["4", "4", "5"], "\\boxed{5}"),
        eval_opt((True, False)),
        voting(["7", "7", "3"], "\\boxed{7}"),
    ]
    # Two ranks, uneven, one without any evaluator episode: as a data-parallel step splits.
    parts = [behaviour_counts(episodes[:4], extract_boxed), behaviour_counts([], extract_boxed)]
    parts.append(behaviour_counts(episodes[4:], extract_boxed))
    merged = from_counts(add_counts(parts))
    assert merged == pytest.approx(behaviour_metrics(episodes, extract_boxed))
    assert set(merged) == set(behaviour_metrics(episodes, extract_boxed))


def test_the_metrics_logged_are_the_vocabularys_behaviour_keys_and_each_roles_truncation():
    # A key declared in the vocabulary but never computed here, or computed but not declared,
    # fails: the two lists cannot drift apart.
    orchestrated = Episode(
        problem_id="p", sample=0, turns=[turn("orchestrator"), turn("worker"), turn("synthesizer")]
    )
    episodes = [
        eval_opt((False, True), (True, True)),
        voting(["4", "4", "5"], "\\boxed{4}"),
        orchestrated,
    ]
    logged = set(behaviour_metrics(episodes, extract_boxed))
    roles = {t.role for ep in episodes for t in ep.turns}
    assert logged == {*BEHAVIOUR_KEYS, *(role_key(role, TRUNC_FRAC) for role in roles)}
