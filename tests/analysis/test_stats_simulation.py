"""The seed statistics checked by simulation: on synthetic experiments whose true effect is
known, the 95% intervals cover it in 93–97% of 1,000 experiments and a true zero gets a verdict
at most 5% of the time; cells alike are called "disagreeing" at most 5% of the
time, and where they disagree there is no pooled interval to cover anything.

Each experiment draws 1–4 cells (workflows) with 3–10 seeds each, cell effects that differ
(between-cell heterogeneity, SD `TAU`), and seed noise of a different size per experiment.
The truth of a cell's interval is that cell's effect; the truth of the pooled "all cells"
interval and of the main effects is the average over the experiment's cells, which is what
they estimate (cells are the unit, seeds the replicates). One `numpy.random.default_rng`
with a fixed seed and no threaded maths: the same numbers on every machine. About 2 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.stats import main_effects, paired_effect

EXPERIMENTS = 1_000
TAU = 0.03  # SD of the cell effects around their average


def _experiment(rng, effect, tau):
    n_cells = int(rng.integers(1, 5))
    n_seeds = int(rng.integers(3, 11))
    sigma = float(rng.uniform(0.02, 0.08))  # seed-to-seed SD of one run's accuracy
    cell_effects = tau * rng.standard_normal(n_cells)
    cell_effects += effect - cell_effects.mean()  # their average is the known truth
    runs = []
    for c, cell_effect in enumerate(cell_effects):
        base = float(rng.uniform(0.2, 0.6))  # the cell's accuracy under shared
        for seed in range(n_seeds):
            shared = base + sigma * float(rng.standard_normal())
            per_role = base + cell_effect + sigma * float(rng.standard_normal())
            for sharing, peak in (("shared", shared), ("per_role", per_role)):
                cell = {"workflow": f"w{c}", "task": "math", "model": "m", "sharing": sharing}
                accuracy = {"peak": peak, "final": peak, "cliff_status": "none"}
                runs.append({"cell": cell, "seed": seed, "summary": {"accuracy": accuracy}})
    return runs, cell_effects


def _simulate(effect, tau=TAU):
    rng = np.random.default_rng(20261203)
    tally = {"cells": 0, "cell_cover": 0, "pooled_cover": 0, "pooled_verdict": 0}
    tally.update(cell_verdict=0, main_cover=0, main_n=0, pooled_n=0, multi=0, disagree=0)
    tally["main_disagree"] = 0
    for _ in range(EXPERIMENTS):
        runs, truth = _experiment(rng, effect, tau)
        out = paired_effect(runs, metrics=("peak",))
        for row, cell_truth in zip(out["cells"], truth, strict=True):
            e = row["peak"]
            tally["cells"] += 1
            tally["cell_cover"] += e["low"] <= cell_truth <= e["high"]
            tally["cell_verdict"] += e["decision"] not in ("undecided", "insufficient")
        pooled = out["overall"]["peak"]
        tally["multi"] += len(out["cells"]) >= 2
        tally["disagree"] += pooled["decision"] == "disagree"
        if pooled["low"] is not None:  # no pooled interval where the cells disagree
            tally["pooled_n"] += 1
            tally["pooled_cover"] += pooled["low"] <= effect <= pooled["high"]
        tally["pooled_verdict"] += pooled["decision"] in ("first_higher", "second_higher")
        # The sharing main effect: per_role's mean of cell means minus the average of the
        # two levels' = half the average paired effect.
        (per_role,) = [
            r
            for r in main_effects(runs, metrics=("peak",))["sharing"]["peak"]
            if r["level"] == "per_role"
        ]
        tally["main_disagree"] += per_role["decision"] == "disagree"
        if per_role["low"] is not None:  # none where the cells disagree, as for the pooled
            tally["main_n"] += 1
            tally["main_cover"] += per_role["low"] <= effect / 2 <= per_role["high"]
    return tally


@pytest.fixture(scope="module")
def at_zero():
    return _simulate(0.0)


@pytest.fixture(scope="module")
def all_zero():
    """Every cell's effect exactly zero: where a cell's verdict can be false."""
    return _simulate(0.0, tau=0.0)


@pytest.fixture(scope="module")
def at_effect():
    return _simulate(0.04)


@pytest.mark.parametrize("which", ["at_zero", "all_zero", "at_effect"])
def test_the_95_percent_intervals_cover_the_truth_95_percent_of_the_time(which, request):
    tally = request.getfixturevalue(which)
    assert 0.93 <= tally["cell_cover"] / tally["cells"] <= 0.97
    assert 0.93 <= tally["pooled_cover"] / tally["pooled_n"] <= 0.97


def test_a_true_zero_gets_a_verdict_at_most_5_percent_of_the_time(at_zero, all_zero):
    # An experiment's verdict (the pooled "all cells" effect): at most 5%.
    assert all_zero["pooled_verdict"] / EXPERIMENTS <= 0.05
    assert at_zero["pooled_verdict"] / EXPERIMENTS <= 0.05  # zero on average over the cells
    # A cell's: a 95% t-interval errs 5% of the time by construction, so over ~2,500
    # simulated cells the rate is 5% give or take the Monte Carlo error (SD .44%); allow two.
    cells = all_zero["cells"]
    assert all_zero["cell_verdict"] / cells <= 0.05 + 2 * (0.05 * 0.95 / cells) ** 0.5


@pytest.fixture(scope="module")
def at_effect_alike():
    """The same effect (.05) in every cell: nothing for the heterogeneity test to find."""
    return _simulate(0.05, tau=0.0)


def test_a_real_effect_is_found_in_most_experiments(at_effect_alike):
    # Not a coverage claim: the check that the intervals are not simply wide.
    assert at_effect_alike["pooled_verdict"] / EXPERIMENTS > 0.5


def test_cells_alike_are_said_to_disagree_at_most_5_percent_of_the_time(all_zero, at_zero):
    # Welch's test at 0.05 over the ~750 experiments with two or more cells: 5% give or take
    # the Monte Carlo error (SD .8%); allow two. Cells that differ (SD .03 between cells)
    # are seen to disagree far more often, and then no pooled interval is given.
    multi = all_zero["multi"]
    assert all_zero["disagree"] / multi <= 0.05 + 2 * (0.05 * 0.95 / multi) ** 0.5
    assert at_zero["disagree"] / at_zero["multi"] > 0.15


def test_main_effects_cover_their_truth_too(at_zero, all_zero, at_effect):
    # Per_role's sharing main effect is the average paired effect / 2 (mean of the two
    # levels' cell means), with the same seed variances behind it.
    for tally in (at_zero, all_zero, at_effect):
        assert 0.93 <= tally["main_cover"] / tally["main_n"] <= 0.97


def test_main_effects_say_the_cells_disagree_as_often_as_the_paired_effect(all_zero, at_zero):
    # The same heterogeneity guard covers Main effects (Welch's test over the other axes'
    # cells, and opposite decided directions): alike cells rarely split, differing ones do.
    multi = all_zero["multi"]
    assert all_zero["main_disagree"] / multi <= 0.05 + 2 * (0.05 * 0.95 / multi) ** 0.5
    assert at_zero["main_disagree"] / at_zero["multi"] > 0.15
