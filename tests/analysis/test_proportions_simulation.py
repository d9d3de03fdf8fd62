"""The cliff-rate intervals checked by simulation: a cell's difference of cliff rates
(per_role − shared over its seeds) has a 95% interval inside [−1, 1] that covers the true
difference in about 95% of cells on average, and in at least 85% for every combination of
rates, correlation and 3–10 seeds tried.

Each configuration draws pairs of runs (one seed, both sharing modes) whose cliffs are
Bernoulli(p_shared) and Bernoulli(p_per_role), correlated through a shared uniform draw with
probability `rho` (the same seed may fail alike under both modes). A Student-t interval over
the 0/1 differences — the rule before this one — gave [−0.77, +2.10] for three pairs, and
covers 0% of cells whose pairs all agree. One `numpy.random.default_rng` with a fixed seed: the
same numbers on every machine.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from analysis.proportions import paired_difference, wilson
from analysis.stats import paired_effect

RATES = (0.0, 0.1, 0.3, 0.5, 0.9)
CORRELATIONS = (0.0, 0.5)
SEEDS = (3, 5, 10)
REPEATS = 200


def _cell(rng, p_shared, p_per_role, rho, n):
    """One cell's runs: n seeds, both modes, cliffs drawn as the module docstring says."""
    u_shared = rng.random(n)
    u_per_role = np.where(rng.random(n) < rho, u_shared, rng.random(n))
    runs = []
    for seed in range(n):
        for sharing, cliff in (
            ("shared", u_shared[seed] < p_shared),
            ("per_role", u_per_role[seed] < p_per_role),
        ):
            accuracy = {"peak": 0.5, "final": 0.5, "cliff_status": "cliff" if cliff else "none"}
            cell = {"workflow": "w", "task": "math", "model": "m", "sharing": sharing}
            runs.append({"cell": cell, "seed": seed, "summary": {"accuracy": accuracy}})
    return runs


@pytest.fixture(scope="module")
def coverage():
    """{(p_shared, p_per_role, rho, n): share of the cells shown with an interval whose
    interval covered the truth}, and every interval's ends. A cell with no cliff in any run
    shows "no cliffs" and no interval, so it has nothing to cover."""
    rng = np.random.default_rng(20261206)
    cover, ends = {}, []
    for p1, p2, rho, n in itertools.product(RATES, RATES, CORRELATIONS, SEEDS):
        hits = shown = 0
        for _ in range(REPEATS):
            effect = paired_effect(_cell(rng, p1, p2, rho, n), metrics=("cliff",))
            e = effect["cells"][0]["cliff"]
            if e["decision"] == "no_cliffs":  # no cliff in any run: "no cliffs", no interval
                continue
            shown += 1
            ends.append((e["low"], e["high"]))
            hits += e["low"] - 1e-12 <= p2 - p1 <= e["high"] + 1e-12
        if shown:
            cover[(p1, p2, rho, n)] = hits / shown
    return cover, ends


def test_a_difference_of_rates_never_leaves_minus_one_to_one(coverage):
    _, ends = coverage
    assert ends and all(-1 <= low <= high <= 1 for low, high in ends)


def test_the_95_percent_interval_covers_the_true_difference(coverage):
    cover, _ = coverage
    # Wilson-based intervals err wide on average; the worst cells are 3 seeds at extreme
    # rates, where a 0/1 outcome per seed leaves few intervals to choose from.
    assert 0.94 <= np.mean(list(cover.values())) <= 0.99
    assert min(cover.values()) >= 0.85


def test_three_pairs_of_one_cliff_give_the_interval_by_hand():
    # The case the t-interval made +0.667 [−0.768, +2.101]: cliffs in 2 of 3 per_role runs,
    # none under shared. Newcombe: 2/3 − 0 with Wilson (0.208, 0.939) and (0, 0.562), φ = 0.
    out = paired_difference([0, 0, 0], [1, 1, 0])
    low2, high2 = wilson(2, 3)
    low1, high1 = wilson(0, 3)
    assert (low2, high2, low1, high1) == pytest.approx((0.2077, 0.9385, 0.0, 0.5615), abs=1e-4)
    down = ((2 / 3 - low2) ** 2 + high1**2) ** 0.5
    assert out.mean == pytest.approx(2 / 3)
    assert out.low == pytest.approx(2 / 3 - down) and out.high == pytest.approx(high2)
    assert -1 <= out.low < 0 < out.high <= 1


def test_wilson_is_scipys_score_interval():
    # The closed form, for the record: (p + z²/2n ± z√(p(1−p)/n + z²/4n²)) / (1 + z²/n).
    z = 1.959963984540054
    for k, n in [(0, 3), (1, 3), (3, 3), (4, 10)]:
        p = k / n
        centre, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
        expected = ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n))
        assert wilson(k, n) == pytest.approx(expected, abs=1e-12)
