"""The radar's two rules on behaviour metrics, on hand-built series whose events are worked out
in the comments: an evaluator accepting wrong answers, voters collapsing to one answer."""

from __future__ import annotations

import pytest

from analysis.radar import radar

WRONG = "behav/evaluator_accept_wrong"
AGREE = "behav/voter_agreement"


def brief(events):
    return [(e["kind"], e["role"], e["step"], e["seen_at"], e["value"], e["limit"]) for e in events]


def test_an_evaluator_accepting_most_wrong_answers_three_steps_running_is_an_event():
    # Logged every other step. Above 0.9 at steps 6 and 8 only (two in a row), then at 12, 14,
    # 16 (three): the event is at 12, seen at 16. Exactly 0.9 is not above.
    steps = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    values = [0.2, 0.5, 0.9, 0.95, 1.0, 0.6, 0.92, 1.0, 0.91, 0.3]
    out = radar({WRONG: (steps, values)})
    assert brief(out["events"]) == [("evaluator_accepts_wrong", "evaluator", 12, 16, 0.92, 0.9)]
    assert out["thresholds"]["accept_wrong_threshold"] == 0.9
    # Two in a row suffice when asked; a stricter threshold sees none.
    assert brief(radar({WRONG: (steps, values)}, accept_wrong_consecutive=2)["events"])[0][2] == 6
    assert radar({WRONG: (steps, values)}, accept_wrong_threshold=0.95)["events"] == []


def test_the_event_is_causal_more_points_never_move_it():
    steps = list(range(10))
    values = [0.1, 0.1, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    whole = radar({WRONG: (steps, values)})["events"]
    for n in range(5, 10):
        assert radar({WRONG: (steps[:n], values[:n])})["events"] == whole


def test_voter_agreement_rising_to_one_is_a_collapse():
    # Reference: median of the first 5 values (.25 .5 .25 .5 .5) = .5 < .95. From step 5 on:
    # 1 1 .75 (a break) then 1 × 5 from step 8: the event is at 8, seen at 12.
    steps = list(range(14))
    values = [0.25, 0.5, 0.25, 0.5, 0.5, 1, 1, 0.75, 1, 1, 1, 1, 1, 1]
    out = radar({AGREE: (steps, values)})
    assert brief(out["events"]) == [("voter_collapse", None, 8, 12, 1.0, 0.95)]
    # Four in a row are not enough (steps 0–12 only hold 1 1 1 1 1 from 8 … 12: drop 12).
    assert radar({AGREE: (steps[:12], values[:12])})["events"] == []


def test_voters_that_always_agreed_never_collapsed():
    # The base model's voters agree already: the reference (1.0) is at the threshold.
    steps = list(range(20))
    assert radar({AGREE: (steps, [1.0] * 20)})["events"] == []
    # Only the reference points' median counts: a high first value alone does not suppress it.
    values = [1.0, 0.5, 0.5, 0.5, 0.5] + [1.0] * 15
    assert brief(radar({AGREE: (steps, values)})["events"])[0][:4] == (
        "voter_collapse",
        None,
        5,
        9,
    )


def test_missing_points_are_skipped_and_bad_thresholds_named():
    steps = [0, 1, 2, 3, 4]
    values = [0.95, None, 0.99, float("nan"), 1.0]  # three logged values above .9
    assert brief(radar({WRONG: (steps, values)})["events"]) == [
        ("evaluator_accepts_wrong", "evaluator", 0, 4, 0.95, 0.9)
    ]
    with pytest.raises(ValueError, match="voter_consecutive"):
        radar({}, voter_consecutive=0)
    with pytest.raises(ValueError, match="accept_wrong_threshold"):
        radar({}, accept_wrong_threshold=1.5)


def test_a_verdict_disagreement_raises_reward_hacking_suspected_at_its_step():
    series = {"sandbox/verdict_disagreements": ([1, 2, 3, 4], [0.0, 0.0, 2.0, 0.0])}
    (event,) = radar(series)["events"]
    assert (event["kind"], event["role"], event["step"], event["seen_at"]) == (
        "reward_hacking_suspected",
        None,
        3,
        3,
    )
    assert event["value"] == 2.0 and event["limit"] == 0.0 and not event["provisional"]
    quiet = {"sandbox/verdict_disagreements": ([1, 2, 3], [0.0, 0.0, 0.0])}
    assert radar(quiet)["events"] == []
