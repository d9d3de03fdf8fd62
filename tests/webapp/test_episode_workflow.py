"""An episode record read as its workflow (`webapp/episodes/workflow.py`): stages and their
titles for every workflow, verdicts read from the rollout's scores, the outcomes the filters
use, and the gradient share read defensively (absent, per role, per turn, odd values)."""

import pytest

from tests.webapp.episode_records import eval_opt, orch_workers, single, voting
from webapp.episodes.workflow import grad_shares, layout, outcomes, workflow_name


def titles(record):
    return [(stage.title, stage.arrow, len(stage.turns)) for stage in layout(record)]


def test_voting_is_voters_then_the_aggregator():
    record = voting(voters=(1, 0, 0), correct=False)
    assert workflow_name(record) == "voting"
    assert titles(record) == [("voters", "→", 3), ("aggregator", "→", 1)]
    assert outcomes(record) == ["aggregator_missed_correct", "voters_split"]
    assert outcomes(voting(voters=(0, 0, 0), correct=False)) == ["no_voter_correct"]
    assert outcomes(voting(voters=(1, 1, 1), correct=True)) == []


def test_evaluator_optimizer_rounds_and_verdicts():
    record = eval_opt(rounds=((False, False), (False, True)))
    assert workflow_name(record) == "evaluator-optimizer"
    assert titles(record) == [
        ("round 1: generator", "→", 1),
        ("round 1: evaluator", "→", 1),
        ("round 2: generator", "↺", 1),
        ("round 2: evaluator", "→", 1),
    ]
    verdicts = [(v.verdict, v.judged) for s in layout(record) for v in s.turns]
    assert verdicts == [
        (None, "wrong"),
        ("rejected", "right"),
        (None, "wrong"),
        ("accepted", "wrong"),
    ]
    assert outcomes(record) == ["evaluator_accepted_wrong"]
    assert outcomes(eval_opt(rounds=((True, False), (True, True)))) == [
        "evaluator_rejected_correct"
    ]


def test_orchestrator_workers_and_an_empty_plan():
    assert titles(orch_workers(workers=3)) == [
        ("orchestrator", "→", 1),
        ("workers", "→", 3),
        ("synthesizer", "→", 1),
    ]
    empty = orch_workers(workers=0)
    assert [t for t, _, _ in titles(empty)] == ["orchestrator", "synthesizer"]
    assert outcomes(empty) == ["empty_plan", "malformed"]


def test_single_and_truncation():
    record = single()
    record["turns"][0]["truncated"] = True
    assert workflow_name(record) == "single" and titles(record) == [("solver", "→", 1)]
    assert outcomes(record) == ["truncated"]


def test_an_odd_record_is_read_without_error():
    assert layout({}) == [] and workflow_name({}) == "no turns" and outcomes({}) == []
    odd = {"turns": ["not a turn", {"role": "evaluator", "score": "x", "stage": None}]}
    assert [len(s.turns) for s in layout(odd)] == [1]
    assert outcomes({"malformed": "nonsense", "turns": None}) == []


@pytest.mark.parametrize(
    "extra, shares",
    [
        ({}, {}),
        (
            {"grad_share": {"generator": 0.25, "aggregator": 0.5}},
            {"generator": 0.25, "aggregator": 0.5},
        ),
        ({"grad_shares": {"generator": 0.25}}, {"generator": 0.25}),
        ({"grad_share": {"generator": float("nan"), "aggregator": "0.5", "x": True}}, {}),
        ({"grad_share": [0.1, 0.2]}, {}),
    ],
)
def test_a_gradient_share_is_read_when_present(extra, shares):
    assert grad_shares(voting(**extra)) == shares


def test_a_gradient_share_per_turn_is_summed_by_role():
    record = voting()
    for turn, share in zip(record["turns"], (0.1, 0.2, None, 0.7), strict=True):
        turn["grad_share"] = share
    assert grad_shares(record) == pytest.approx({"generator": 0.3, "aggregator": 0.7})


def test_an_answer_the_independent_recheck_failed_is_an_outcome_of_its_own():
    record = single()
    record["verdict_disagreement"] = True
    assert outcomes(record) == ["verdict_disagreement"]
    assert outcomes(single()) == []
