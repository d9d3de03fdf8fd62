"""Seed bands on hand-built runs whose per-step statistics are worked out in the comments."""

from __future__ import annotations

import json
import math

import pytest

from analysis.bands import group_bands, seed_bands
from analysis.smoothing import smooth_series

# t(.975, 2) = 4.302653 (tables); sd of {1, 2, 3} = 1, so the half-width is 4.302653/√3.
HALF_3 = 4.302653 / math.sqrt(3)


def test_mean_interval_min_and_max_per_step():
    runs = [([0, 1, 2], [1.0, 2.0, 3.0]), ([0, 1, 2], [2.0, 3.0, 4.0]), ([0, 1, 2], [3, 4, 5])]
    out = seed_bands(runs)
    assert out["steps"] == [0, 1, 2] and out["n"] == [3, 3, 3] and out["n_runs"] == 3
    assert out["mean"] == [2.0, 3.0, 4.0]
    assert out["low"] == pytest.approx([2 - HALF_3, 3 - HALF_3, 4 - HALF_3], abs=1e-6)
    assert out["high"] == pytest.approx([2 + HALF_3, 3 + HALF_3, 4 + HALF_3], abs=1e-6)
    assert out["min"] == [1.0, 2.0, 3.0] and out["max"] == [3.0, 4.0, 5.0]
    json.dumps(out, allow_nan=False)


def test_identical_runs_have_a_zero_width_band():
    out = seed_bands([([0, 10], [0.5, 0.25])] * 4)
    assert out["low"] == out["mean"] == out["high"] == [0.5, 0.25]


def test_union_keeps_every_step_and_intersection_only_shared_ones():
    runs = [([0, 1, 2], [1.0, 1.0, 1.0]), ([1, 2, 3], [3.0, 3.0, 3.0])]
    union = seed_bands(runs, align="union")
    assert union["steps"] == [0, 1, 2, 3] and union["n"] == [1, 2, 2, 1]
    assert union["mean"] == [1.0, 2.0, 2.0, 3.0]
    assert union["low"][0] is None and union["high"][3] is None and union["low"][1] is not None
    inter = seed_bands(runs, align="intersection")
    assert inter["steps"] == [1, 2] and inter["n"] == [2, 2] and inter["mean"] == [2.0, 2.0]


def test_smoothing_is_per_run_before_alignment():
    s, v = smooth_series([0, 1, 2], [0.0, 1.0, 1.0], method="ema", alpha=0.5)
    assert v.tolist() == [0.0, 0.5, 0.75]
    s, v = smooth_series([2, 0, 1], [1.0, 0.0, 1.0], method="rolling", window=2)  # sorted first
    assert s.tolist() == [0, 1, 2] and v.tolist() == [0.0, 0.5, 1.0]
    out = seed_bands([([0, 1, 2], [0.0, 1.0, 1.0])] * 2, smoothing="ema", alpha=0.5)
    assert out["mean"] == [0.0, 0.5, 0.75]


def test_missing_values_are_dropped_per_run():
    out = seed_bands([([0, 1], [1.0, None]), ([0, 1], [3.0, float("nan")]), ([], [])])
    assert out["steps"] == [0] and out["mean"] == [2.0] and out["n_runs"] == 2
    assert seed_bands([])["steps"] == [] and seed_bands([])["n_runs"] == 0


def test_group_bands_by_a_config_field():
    runs = [
        {"config": {"sharing": "shared"}, "series": ([0, 1], [1.0, 1.0])},
        {"config": {"sharing": "per_role"}, "series": ([0, 1], [2.0, 4.0])},
        {"config": {"sharing": "per_role"}, "series": ([0, 1], [4.0, 6.0])},
        {"config": {}, "series": ([0], [9.0])},
    ]
    groups = group_bands(runs, "sharing", align="intersection")
    assert [(g["value"], g["runs"]) for g in groups] == [("per_role", 2), ("shared", 1), (None, 1)]
    assert groups[0]["band"]["mean"] == [3.0, 5.0]


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="align"):
        seed_bands([], align="outer")
    with pytest.raises(ValueError, match="smoothing"):
        seed_bands([([0], [1.0])], smoothing="lowess")
    with pytest.raises(ValueError, match="alpha"):
        smooth_series([0], [1.0], method="ema", alpha=0)
    with pytest.raises(ValueError, match="window"):
        smooth_series([0], [1.0], method="rolling", window=0)


def test_an_accuracy_band_never_runs_below_0_or_above_1():
    # Three seeds near 0: mean .01, the t-interval ±.04 would reach −.03.
    runs = [([0, 1], [0.0, 0.0]), ([0, 1], [0.0, 0.03]), ([0, 1], [0.0, 0.0])]
    free = seed_bands(runs)
    assert free["low"][1] < 0
    clipped = seed_bands(runs, bounds=(0.0, 1.0))
    assert clipped["low"][1] == 0.0 and clipped["high"][1] == free["high"][1]
    assert clipped["mean"] == free["mean"]
