"""The verdicts, case by case: one rule for the cliff at every accuracy level, one
implementation of capture, and statistics that say "not enough data" when there is not.

Each case is a curve or an experiment from the issue (or the brief that followed it) with its
expected verdict and evidence worked out in the comments; docs/analysis.md gives the rule.
"""

from __future__ import annotations

import math

import pytest

from analysis.cells import MIN_SEEDS
from analysis.cliffs import summarize_accuracy
from analysis.intervals import student_t_quantile
from analysis.radar import radar
from analysis.runs import summarize_run
from analysis.stats import main_effects, paired_effect

STEPS10 = list(range(0, 100, 10))
STEPS20 = list(range(0, 200, 10))


def binomial_se(values, problems=256):
    """The SE a Troupe evaluation of `problems` problems logs beside each accuracy."""
    return [math.sqrt(max(a * (1 - a), 0.0) / problems) for a in values]


# --- the cliff at every accuracy level --------------------------------------------------------

# (name, steps, values, se, expected status, expected onset)
CASES = [
    # The collapse: voting on math 0.067 → 0.000. SE of the peak ≈ .0156, of the final
    # 0; z(.05/10) = 2.58, so θ = max(½ × .027, 2.58 × .0156) ≈ .040 and the threshold ≈ .027:
    # the run is below it from step 50 (smoothed .02 → 0) to the end. The old floor θ ≥ .10
    # put the threshold below zero: no cliff was possible.
    (
        "collapse from 0.067",
        STEPS10,
        [0.04, 0.05, 0.06, 0.067, 0.06, 0.02, 0.0, 0.0, 0.0, 0.0],
        "binomial",
        "cliff",
        50,
    ),
    # A noise-level wobble at 0.9 on a small evaluation set (SE .05): the best evaluation .97
    # and the final .85 differ by .12, which noise explains (z(.05/10) × .058 = .149). The old
    # rule (θ = .10) called it a cliff from step 60.
    (
        "noise-level wobble at 0.9",
        STEPS10,
        [0.85, 0.90, 0.86, 0.97, 0.88, 0.84, 0.87, 0.85, 0.84, 0.86],
        [0.05] * 10,
        "none",
        None,
    ),
    # A slow decline at a low level: .02 → .08 at step 40, then −.005 an evaluation to .005,
    # below the base. θ = max(½ × .06, z(.05/20) 2.81 × SE .0173) = .049, threshold .031:
    # below from step 140 (.03 smoothed) to the end. The old floor made the threshold −.02.
    (
        "slow decline",
        STEPS20,
        [0.02, 0.04, 0.06, 0.07, 0.08] + [0.08 - 0.005 * i for i in range(1, 15)] + [0.005],
        "binomial",
        "cliff",
        140,
    ),
    # Down to 0 for three evaluations, then back near the peak: the smoothed series is not
    # below to the end, so no cliff (the radar may have alerted meanwhile; the verdict is
    # "none").
    (
        "late recovery",
        STEPS10,
        [0.04, 0.05, 0.067, 0.06, 0.0, 0.0, 0.0, 0.06, 0.065, 0.06],
        "binomial",
        "none",
        None,
    ),
    # Never better than the base (.30 at step 0), then down to .10: no learned peak, so it is
    # terminal degradation, not a cliff. The old rule called it a cliff from step 10.
    (
        "fall below the base with no learned peak",
        STEPS10,
        [0.30, 0.28, 0.26, 0.22, 0.18, 0.14, 0.10, 0.10, 0.10, 0.10],
        "binomial",
        "degradation",
        None,
    ),
]


@pytest.mark.parametrize(
    "steps, values, se, status, onset",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_cliff_verdict_is_right_at_every_accuracy_level(steps, values, se, status, onset):
    se = binomial_se(values) if se == "binomial" else se
    out = summarize_accuracy(steps, values, se=se)
    assert out["cliff_status"] == status
    assert out["cliff_onset"] == onset
    assert out["cliff"] is (status == "cliff")
    # The evidence beside every verdict: threshold, θ and the noise test behind it.
    test = out["cliff_test"]
    assert test["method"] == "se" and test["n_compared"] == len(values)
    assert out["theta"] == pytest.approx(
        max(test["gain_margin"], test["noise_margin"], test["min_drop"])
    )
    assert out["threshold"] == pytest.approx(out["peak"] - out["theta"])
    assert f"threshold {out['threshold']:.3f}" in out["evidence"]
    assert f"p = {test['p']:.2g}" in out["evidence"]
    if status == "cliff":
        assert test["p"] < 0.05
    if status == "degradation":
        assert out["degradation_onset"] is not None
        assert "no learned peak" in out["evidence"]


def test_a_wobble_is_a_cliff_only_when_the_noise_is_small():
    # The same wobble evaluated on many more problems (SE .005) is a real drop of .12.
    values = CASES[1][2]
    assert summarize_accuracy(STEPS10, values, se=[0.005] * 10)["cliff_status"] == "cliff"


def test_paired_per_problem_accuracies_make_the_test_sharper():
    # 100 problems; 10 solved at the peak (step 30), 9 of those lost at the end: a paired
    # drop of .09 with SE √(.09·.91/99)/... well below it, whatever the SE series says.
    values = [0.05, 0.07, 0.08, 0.10, 0.05, 0.02, 0.01, 0.01, 0.01, 0.01]
    per_problem = {}
    for step, accuracy in zip(STEPS10, values, strict=True):
        solved = round(accuracy * 100)
        per_problem[step] = [1.0] * solved + [0.0] * (100 - solved)
    out = summarize_accuracy(STEPS10, values, se=[0.5] * 10, per_problem=per_problem)
    assert out["cliff_test"]["method"] == "paired"
    assert out["cliff_status"] == "cliff"
    # With the (huge) SE alone, the threshold falls below 0: nothing could be detected, so
    # there is no verdict, not "none".
    assert summarize_accuracy(STEPS10, values, se=[0.5] * 10)["cliff_status"] == "too_low"


def test_the_radar_and_the_summary_use_the_same_cliff_rule():
    values = CASES[0][2]
    series = {
        "eval/accuracy": (STEPS10, values),
        "eval/accuracy_se": (STEPS10, binomial_se(values)),
    }
    out = radar(series, running=False)
    cliffs = [e for e in out["events"] if e["kind"] == "cliff"]
    summary = summarize_run(series)["accuracy"]
    assert out["cliff_status"] == summary["cliff_status"] == "cliff"
    assert [e["step"] for e in cliffs] == [summary["cliff_onset"]]
    assert cliffs[0]["limit"] == pytest.approx(summary["threshold"])


def test_the_stop_policy_sees_the_collapse_too():
    from trainer.stop_policy import cliff_stop_reason

    values = [0.04, 0.05, 0.067] + [0.0] * 12
    evals = [(i, a, se) for i, (a, se) in enumerate(zip(values, binomial_se(values), strict=True))]
    reason = cliff_stop_reason(evals, 1)
    assert reason is not None and "cliff at step 3" in reason


# --- capture: one implementation, only where roles share a policy ------------------------------


def _share_series(shares_by_role, steps):
    return {f"role/{r}/grad_share": (steps, v) for r, v in shares_by_role.items()}


def test_a_single_role_run_never_captures():
    # The single-agent run: one role, share 1 on its own policy at every step.
    steps = list(range(40))
    series = _share_series({"solver": [1.0] * 40}, steps)
    assert summarize_run(series, sharing="shared")["capture"] is None
    assert summarize_run(series)["capture"] is None
    assert not [e for e in radar(series, running=False)["events"] if e["kind"] == "capture"]


def test_the_radar_names_the_capture_the_gradients_page_names():
    # The generator dominates early (steps 0–19) and not in the last half: the §6 verdict
    # is "no capture", and the radar must not keep an early "capture generator @13".
    steps = list(range(40))
    gen = [0.9] * 20 + [0.5] * 20
    series = _share_series({"generator": gen, "aggregator": [1 - g for g in gen]}, steps)
    assert summarize_run(series, sharing="shared")["capture"] is None
    for running in (True, False):
        found = radar(series, running=running, sharing="shared")["events"]
        assert not [e for e in found if e["kind"] == "capture"]


def test_a_late_capture_is_dated_where_the_rule_starts_to_hold():
    steps = list(range(40))
    gen = [0.5] * 20 + [0.9] * 20
    series = _share_series({"generator": gen, "aggregator": [1 - g for g in gen]}, steps)
    assert summarize_run(series, sharing="shared")["capture"] == "generator"
    (event,) = radar(series, running=False, sharing="shared")["events"]
    # A prefix of m steps has m − 20 of its later m − m//2 above .6: m = 27 gives 7/14 (not
    # more than half), m = 28 gives 8/14, and every longer prefix more: from step 27 on.
    assert (event["kind"], event["role"], event["step"], event["provisional"]) == (
        "capture",
        "generator",
        27,
        False,
    )
    running = radar(series, running=True, sharing="shared")["events"]
    assert [e["provisional"] for e in running] == [True]


# --- statistics across seeds: not enough data when there is not --------------------------------


def _run(seed, peak, sharing, workflow="voting"):
    cell = {"workflow": workflow, "task": "math", "model": "tiny-s", "sharing": sharing}
    accuracy = {"peak": peak, "final": peak, "cliff_status": "none"}
    return {"cell": cell, "seed": seed, "summary": {"accuracy": accuracy}}


def test_one_seed_per_cell_gives_no_interval_and_no_verdict():
    # The experiment: one seed per cell, differences −0.012 (single) and +0.029
    # (voting). It used to read "+0.009 [+0.009, +0.009] (per_role higher)".
    runs = [
        _run(0, 0.500, "shared", "single"),
        _run(0, 0.488, "per_role", "single"),
        _run(0, 0.500, "shared", "voting"),
        _run(0, 0.529, "per_role", "voting"),
    ]
    out = paired_effect(runs, metrics=("peak",))
    overall = out["overall"]["peak"]
    assert overall["mean"] == pytest.approx(0.0085)
    assert (overall["low"], overall["high"], overall["decision"]) == (None, None, "insufficient")
    assert overall["verdict"].startswith("not enough data")
    for cell in out["cells"]:
        effect = cell["peak"]
        assert effect["decision"] == "insufficient" and effect["low"] is None
        # The plan asks for the two more pairs a verdict needs, even with no SD yet.
        assert (effect["n_needed"], effect["more_needed"]) == (MIN_SEEDS, MIN_SEEDS - 1)
    by_level = main_effects(runs, metrics=("peak",))
    for rows in (by_level["workflow"]["peak"], by_level["sharing"]["peak"]):
        assert all(r["decision"] == "insufficient" and r["low"] is None for r in rows)


def test_three_seeds_of_opposite_sign_get_the_t_interval_and_stay_undecided():
    diffs = [0.05, -0.02, 0.06]
    runs = []
    for seed, d in enumerate(diffs):
        runs += [_run(seed, 0.5, "shared"), _run(seed, 0.5 + d, "per_role")]
    effect = paired_effect(runs, metrics=("peak",))["cells"][0]["peak"]
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    half = student_t_quantile(0.975, 2) * sd / math.sqrt(3)
    assert effect["mean"] == pytest.approx(mean)
    assert effect["low"] == pytest.approx(mean - half)
    assert effect["high"] == pytest.approx(mean + half)
    assert effect["decision"] == "undecided"


def test_the_pooled_effect_treats_cells_as_cells():
    # Cell A: 3 seeds at +.10 ± .01; cell B: 9 seeds at 0 ± .01. Pooling pairs would weigh B
    # three times A (mean .025); cells as the unit give the mean of the cell means, .05.
    runs = []
    for seed, d in enumerate([0.09, 0.10, 0.11]):
        runs += [_run(seed, 0.5, "shared", "a"), _run(seed, 0.5 + d, "per_role", "a")]
    for seed, d in enumerate([-0.01, 0.0, 0.01] * 3):
        runs += [_run(seed, 0.5, "shared", "b"), _run(seed, 0.5 + d, "per_role", "b")]
    overall = paired_effect(runs, metrics=("peak",))["overall"]["peak"]
    assert overall["mean"] == pytest.approx(0.05)
    # These two cells differ by ten SEs: they disagree, so no pooled interval.
    assert overall["n_cells"] == 2 and overall["decision"] == "disagree"
    # Cells that agree (+.05 and +.04, SE of the difference .007) get the interval around
    # the mean of the cell means, .045, not the pair-weighted .0425.
    runs = []
    for seed, d in enumerate([0.04, 0.05, 0.06]):
        runs += [_run(seed, 0.5, "shared", "a"), _run(seed, 0.5 + d, "per_role", "a")]
    for seed, d in enumerate([0.03, 0.04, 0.05] * 3):
        runs += [_run(seed, 0.5, "shared", "b"), _run(seed, 0.5 + d, "per_role", "b")]
    overall = paired_effect(runs, metrics=("peak",))["overall"]["peak"]
    assert overall["mean"] == pytest.approx(0.045)
    assert overall["n_cells"] == 2 and overall["low"] < 0.045 < overall["high"]


def test_degradation_is_its_own_radar_event_and_stops_a_run_too():
    from trainer.stop_policy import cliff_stop_reason

    # Never above the base .30, then down to 0 from step 3: degradation, confirmed once five
    # evaluations are down, and no "cliff" event.
    values = [0.30, 0.28, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    se = binomial_se(values)
    series = {"eval/accuracy": (STEPS10, values), "eval/accuracy_se": (STEPS10, se)}
    found = radar(series, running=True)["events"]
    assert [(e["kind"], e["step"], e["provisional"]) for e in found] == [("degradation", 30, False)]
    evals = [(s, a, e) for s, a, e in zip(STEPS10, values, se, strict=True)]
    assert "degradation at step 30" in cliff_stop_reason(evals, 1)


# --- amplification: the radar's rule is the summary's -------------------------------------------


def test_the_summary_takes_the_radars_amplification_baseline_from_the_planned_length():
    # A run planned for 100 steps that logged 60: the radar's baseline is steps 0–19 (20% of
    # 100): twelve at 1.0 and eight at 1.2, so 1.2 is within its early range and nothing
    # amplifies. Counting 20% of the 60 points logged instead (12, all 1.0: limit 1.03) would
    # call an onset at step 12.
    steps = list(range(60))
    series = {"role/gen/grad_norm": (steps, [1.0] * 12 + [1.2] * 48)}
    found = radar(series, running=False, total_steps=100)["events"]
    assert not [e for e in found if e["kind"] == "amplification"]
    assert summarize_run(series, total_steps=100)["amplification"] == {"gen": None}
    assert summarize_run(series)["amplification"] == {"gen": 12}
