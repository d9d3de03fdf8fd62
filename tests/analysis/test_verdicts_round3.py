"""Round 3 of the verdicts, the statistics half: one answer per question (the heterogeneity
guard covers Main effects), rates get intervals for rates and an undecided cell always asks
for more seeds, a large fall over few evaluations is a "possible cliff", and a baseline of
float dust is no baseline for amplification."""

from __future__ import annotations

import pytest

from analysis.stats import main_effects, paired_effect


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
        r for r in main_effects(runs, metrics=("peak",))["sharing"]["peak"] if r["level"] == "per_role"
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
