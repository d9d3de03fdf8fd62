"""Round 3 of the verdicts, the statistics half: one answer per question (the heterogeneity
guard covers Main effects), rates get intervals for rates and an undecided cell always asks
for more seeds, a large fall over few evaluations is a "possible cliff", and a baseline of
float dust is no baseline for amplification."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.amplification import amplification_verdict
from analysis.cliffs import cliff_label, summarize_accuracy
from analysis.radar import radar
from analysis.runs import RunSummary, summarize_run
from analysis.stats import main_effects, paired_effect, run_metrics


def _run(seed, peak, *, sharing, workflow="voting", cliff=False):
    cell = {"workflow": workflow, "task": "math", "model": "tiny-s", "sharing": sharing}
    status = "cliff" if cliff else "none"
    accuracy = {"peak": peak, "final": peak, "cliff_status": status, "cliff_onset": None}
    return {"cell": cell, "seed": seed, "summary": {"accuracy": accuracy}}


def _opposite_cells():
    """per_role − shared is +0.2 in one workflow and −0.2 in the other (seed noise 0.01)."""
    runs = []
    for workflow, effect in (("voting", 0.2), ("single", -0.2)):
        for seed, noise in enumerate((0.01, -0.01, 0.0, 0.005)):
            runs.append(_run(seed, 0.5, sharing="shared", workflow=workflow))
            runs.append(_run(seed, 0.5 + effect + noise, sharing="per_role", workflow=workflow))
    return runs


# --- one question, one answer -------------------------------------------------------------------


def test_main_effects_do_not_pool_cells_that_disagree():
    runs = _opposite_cells()
    assert paired_effect(runs, metrics=("peak",))["overall"]["peak"]["decision"] == "disagree"
    rows = main_effects(runs, metrics=("peak",))["sharing"]["peak"]
    for row in rows:
        assert row["decision"] == "disagree"
        assert row["verdict"] == "cells disagree: see each cell"
        assert row["low"] is None and row["high"] is None
        assert row["heterogeneity"]["disagree"] and row["heterogeneity"]["k"] == 2


def test_main_effects_of_cells_alike_keep_their_interval():
    runs = []
    for workflow in ("voting", "single"):
        for seed, noise in enumerate((0.01, -0.01, 0.0, 0.005)):
            runs.append(_run(seed, 0.5, sharing="shared", workflow=workflow))
            runs.append(_run(seed, 0.7 + noise, sharing="per_role", workflow=workflow))
    (per_role,) = [
        r
        for r in main_effects(runs, metrics=("peak",))["sharing"]["peak"]
        if r["level"] == "per_role"
    ]
    assert per_role["decision"] == "above" and per_role["low"] > 0
    assert not per_role["heterogeneity"]["disagree"]


# --- rates --------------------------------------------------------------------------------------


def _cliff_cell(shared, per_role, workflow="voting"):
    runs = []
    for seed, (a, b) in enumerate(zip(shared, per_role, strict=True)):
        runs.append(_run(seed, 0.5, sharing="shared", workflow=workflow, cliff=a))
        runs.append(_run(seed, 0.5, sharing="per_role", workflow=workflow, cliff=b))
    return runs


def test_a_cliff_rate_difference_stays_inside_minus_one_to_one():
    # Two of three per_role runs fell, no shared one: once +0.667 [−0.768, +2.101].
    out = paired_effect(_cliff_cell([0, 0, 0], [1, 1, 0]), metrics=("cliff",))
    effect = out["cells"][0]["cliff"]
    assert effect["mean"] == pytest.approx(2 / 3)
    assert -1 <= effect["low"] < 0 < effect["high"] <= 1
    assert effect["method"] == "newcombe"
    pooled = out["overall"]["cliff"]
    assert -1 <= pooled["low"] <= pooled["high"] <= 1


def test_pooled_and_main_cliff_rates_stay_inside_minus_one_to_one():
    runs = _cliff_cell([0, 0, 0], [1, 1, 0]) + _cliff_cell([0, 1, 0], [1, 1, 1], "single")
    out = paired_effect(runs, metrics=("cliff",))
    pooled = out["overall"]["cliff"]
    assert pooled["method"] == "mover" and -1 <= pooled["low"] <= pooled["high"] <= 1
    for rows in main_effects(runs, metrics=("cliff",)).values():
        for row in rows["cliff"]:
            if row["low"] is not None:
                assert -1 <= row["low"] <= row["high"] <= 1


def test_an_undecided_cell_never_asks_for_no_more_seeds():
    # Three pairs (mean 0.2, SD 0.1) whose t-interval straddles 0 although the
    # normal-approximation figure says ⌈(2.8016 × 0.5)²⌉ = 2 pairs should do: once "+0".
    runs = []
    for seed, offset in enumerate((0.125, 0.25, 0.375)):
        runs.append(_run(seed, 0.5, sharing="shared"))
        runs.append(_run(seed, 0.5 + offset, sharing="per_role"))
    effect = paired_effect(runs, metrics=("peak",))["cells"][0]["peak"]
    assert effect["decision"] == "undecided"
    assert effect["more_needed"] >= 1 and effect["n_needed"] > 3
    cliffs = paired_effect(_cliff_cell([0, 0, 0], [1, 1, 0]), metrics=("cliff",))
    cliff = cliffs["cells"][0]["cliff"]
    assert cliff["decision"] == "undecided" and cliff["more_needed"] >= 1


# --- a large fall over few evaluations ----------------------------------------------------------

SHORT_FALL = [0.3, 0.5, 0.6, 0.2, 0.1, 0.1]  # six evaluations, no per-evaluation SE


@pytest.mark.parametrize("running", [False, True])
def test_a_large_fall_over_few_evaluations_is_a_possible_cliff_not_none(running):
    out = summarize_accuracy(range(6), SHORT_FALL, running=running)
    assert out["cliff_test"]["p"] == pytest.approx(0.0866, abs=1e-3)  # not significant at .05
    assert out["cliff_status"] == "possible" and out["cliff"] is False
    assert cliff_label(out) == "possible cliff: too few evaluations to confirm"
    assert "possible cliff: too few evaluations to confirm" in out["evidence"]


def test_a_possible_cliff_flows_to_the_summary_the_radar_and_the_cliff_rate():
    series = {"eval/accuracy": (list(range(6)), SHORT_FALL)}
    summary = summarize_run(series)
    assert summary["accuracy"]["cliff_status"] == "possible"
    assert RunSummary.of(summary).accuracy.label == "possible cliff: too few evaluations to confirm"
    assert radar(series, running=False)["cliff_status"] == "possible"
    assert radar(series, running=True)["cliff_status"] == "possible"
    # Neither a cliff nor "none": no value in a cliff rate, as "too few evaluations".
    assert run_metrics(summary)["cliff"] is None


def test_a_fall_noise_explains_with_a_logged_se_stays_none():
    # The SE was measured (not estimated from six points): a drop within it is "none".
    out = summarize_accuracy(range(6), SHORT_FALL, se=[0.2] * 6)
    assert out["cliff_status"] == "none"


def test_flat_noisy_runs_are_rarely_called_possible():
    rng = np.random.default_rng(47)
    for n in (6, 20, 50):
        said = sum(
            summarize_accuracy(range(n), 0.4 + 0.03 * rng.standard_normal(n))["cliff_status"]
            == "possible"
            for _ in range(400)
        )
        assert said / 400 <= 0.06, n  # measured 1–5% (docs/analysis.md)


# --- amplification from float dust -------------------------------------------------------------

# Ten steps whose groups all had zero advantage (norms of float dust), then real gradients.
DUST = [1e-7 + 1e-8 * (i % 10) for i in range(10)] + [0.05 + 0.001 * (i % 3) for i in range(40)]


def test_a_baseline_of_float_dust_is_no_baseline():
    steps = list(range(len(DUST)))
    verdict = amplification_verdict(steps, DUST)
    assert verdict == {"onset": None, "status": "too_few_steps", "limit": None}
    planned = amplification_verdict(steps, DUST, total_steps=50)
    assert planned["status"] == "too_few_steps" and planned["onset"] is None
    # The radar raises no "amplification confirmed" from it (limits 1.9e-07 and 9.6e-08 once).
    series = {"role/generator/grad_norm": (steps, DUST)}
    events = radar(series, running=False, total_steps=50)["events"]
    assert [e for e in events if e["kind"] == "amplification"] == []


def test_a_real_baseline_with_a_few_dust_steps_still_judges():
    values = [1e-7, 0.05, 0.051, 0.049, 1e-8, 0.05, 0.05, 0.052, 0.05, 0.05] + [0.5] * 10
    verdict = amplification_verdict(range(20), values, total_steps=20)
    assert verdict["status"] == "amplified" and verdict["onset"] == 10
