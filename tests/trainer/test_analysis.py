"""docs/design.md §6 on hand-built curves whose answers are worked out in the comments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis.amplification import amplification_baseline, amplification_onset
from analysis.capture import capture, capture_fractions
from analysis.cells import summarize_cells
from analysis.cliffs import summarize_accuracy
from analysis.downsample import downsample
from analysis.intervals import Estimate, mean_ci, student_t_quantile
from analysis.runs import summarize_run
from trainer import run_report
from trainer.cli import main as trainer_cli

STEPS = [0, 10, 20, 30, 40, 50, 60, 70, 80]
# base .2, peak .7 at 30, θ = max(.1, .5 × .5) = .25, threshold .45; final = mean(.25, .2, .2).
# Smoothed: .3 .4 .6 .65 .65 .3 .25 .2 .2 → below .45 from index 5 (step 50) to the end.
CLIFF = [0.2, 0.4, 0.6, 0.7, 0.65, 0.3, 0.25, 0.2, 0.2]


def assert_plain(obj):
    """Only JSON's own Python types, nothing numpy, no NaN."""
    json.dumps(obj, allow_nan=False)
    if isinstance(obj, dict):
        assert all(isinstance(k, str) for k in obj)
        for v in obj.values():
            assert_plain(v)
    elif isinstance(obj, list):
        for v in obj:
            assert_plain(v)
    else:
        assert obj is None or type(obj) in (int, float, str, bool), type(obj)


# --- accuracy -------------------------------------------------------------------------------


def test_base_peak_final_and_gains_follow_the_definitions():
    out = summarize_accuracy(STEPS, CLIFF)
    assert out["base"] == 0.2
    assert out["peak"] == 0.7 and out["peak_step"] == 30
    assert out["final"] == pytest.approx((0.25 + 0.2 + 0.2) / 3)
    assert out["gain"] == pytest.approx(0.5)
    assert out["final_gain"] == pytest.approx((0.25 + 0.2 + 0.2) / 3 - 0.2)
    assert out["theta"] == pytest.approx(0.25) and out["threshold"] == pytest.approx(0.45)
    assert out["n_evals"] == 9 and out["first_step"] == 0 and out["last_step"] == 80
    assert_plain(out)


def test_a_fall_that_stays_down_is_a_cliff():
    out = summarize_accuracy(STEPS, CLIFF)
    assert out["cliff"] is True
    assert out["cliff_status"] == "cliff"
    assert out["cliff_onset"] == 50


def test_peak_step_is_the_first_step_attaining_the_peak():
    out = summarize_accuracy([0, 1, 2, 3], [0.1, 0.5, 0.2, 0.5])
    assert out["peak_step"] == 1


def test_cliff_onset_is_first_step_of_the_final_run_below_threshold():
    # Peak .7 first at step 10, threshold .45. Smoothed: .45 .3 .3 .3 .68 .68 .3 .2 .2 .2 — an
    # early dip (steps 10–30) recovers; the final stretch below starts at step 60.
    values = [0.2, 0.7, 0.3, 0.3, 0.68, 0.7, 0.3, 0.2, 0.2, 0.2]
    out = summarize_accuracy(range(0, 100, 10), values, se=[0.01] * 10)
    assert out["peak_step"] == 10
    assert out["cliff"] is True and out["cliff_onset"] == 60


def test_cliff_onset_is_never_at_or_before_the_peak():
    # An isolated spike: the smoothed series is below threshold everywhere, peak step included,
    # so the final stretch is cut to start just after the peak.
    # SE .01 per evaluation: the drop of .7 is far beyond noise.
    out = summarize_accuracy([0, 10, 20, 30, 40], [0.2, 0.9, 0.2, 0.2, 0.2], se=[0.01] * 5)
    assert out["cliff"] is True and out["cliff_onset"] == 20


def test_a_dip_that_recovers_is_not_a_cliff():
    values = [0.2, 0.6, 0.3, 0.25, 0.3, 0.6, 0.62, 0.6]
    out = summarize_accuracy(range(8), values)
    assert out["cliff"] is False and out["cliff_onset"] is None
    assert out["cliff_status"] == "none"


def test_a_final_single_drop_is_not_a_cliff():
    # Threshold .6 − max(.1, .2) = .4; final = mean(.6, .6, .2) = .467 is not below it.
    out = summarize_accuracy(range(6), [0.2, 0.5, 0.6, 0.6, 0.6, 0.2])
    assert out["cliff"] is False


def test_min_drop_is_an_optional_absolute_floor():
    # SE .005: noise margin z(.05/6) × .0058 ≈ .014, lost-gain margin .025, so θ = .025 and
    # the threshold .525: a fall to .47 is a cliff from step 3.
    steps, values, se = range(6), [0.5, 0.55, 0.55, 0.47, 0.47, 0.47], [0.005] * 6
    out = summarize_accuracy(steps, values, se=se)
    assert out["cliff"] is True and out["cliff_onset"] == 3
    # With the old absolute floor .10 (now off by default), θ = .10: no cliff.
    assert summarize_accuracy(steps, values, se=se, min_drop=0.10)["cliff"] is False


def test_drop_frac_scales_theta_with_the_gain():
    out = summarize_accuracy(STEPS, CLIFF, drop_frac=0.9)  # θ = .45, threshold .25
    assert out["threshold"] == pytest.approx(0.25)
    # Final .217 < .25; the smoothed .25 at step 60 is not below, so the stretch starts at 70.
    assert out["cliff"] is True and out["cliff_onset"] == 70


def test_smoothing_window_is_a_parameter():
    values = [0.2, 0.7, 0.3, 0.7, 0.3, 0.3, 0.3]
    # Smoothed: .45 .3 .7 .3 .3 .3 .3 — the lone .7 at step 3 is smoothed away, so the final
    # stretch below .45 starts there; unsmoothed (median_window=1) it starts right after it.
    se = [0.01] * 7
    assert summarize_accuracy(range(7), values, se=se)["cliff_onset"] == 3
    assert summarize_accuracy(range(7), values, se=se, median_window=1)["cliff_onset"] == 4
    with pytest.raises(ValueError, match="odd"):
        summarize_accuracy(range(7), values, median_window=2)


def test_nan_evaluations_are_ignored():
    steps = STEPS + [5, 15, 25]
    values = CLIFF + [float("nan"), None, math.nan]
    out = summarize_accuracy(steps, values)
    assert out == summarize_accuracy(STEPS, CLIFF)
    assert out["n_evals"] == 9


def test_unsorted_steps_are_sorted():
    order = [4, 0, 8, 2, 6, 1, 7, 3, 5]
    out = summarize_accuracy([STEPS[i] for i in order], [CLIFF[i] for i in order])
    assert out == summarize_accuracy(STEPS, CLIFF)


def test_a_repeated_step_keeps_its_last_value():
    out = summarize_accuracy([0, 10, 10], [0.2, 0.9, 0.4])
    assert out["peak"] == 0.4 and out["n_evals"] == 2


def test_a_single_evaluation_has_no_verdict():
    out = summarize_accuracy([0], [0.3])
    assert out["base"] == out["peak"] == out["final"] == 0.3
    assert out["gain"] == 0.0 and out["final_gain"] == 0.0 and out["peak_step"] == 0
    assert out["cliff"] is False and out["cliff_onset"] is None
    assert out["cliff_status"] == "insufficient"


def test_no_evaluations_give_none_everywhere():
    for steps, values in (([], []), ([0, 10], [None, float("nan")])):
        out = summarize_accuracy(steps, values)
        for key in ("base", "peak", "peak_step", "final", "gain", "final_gain", "cliff_onset"):
            assert out[key] is None
        assert out["cliff"] is False and out["cliff_status"] == "insufficient"
        assert out["n_evals"] == 0
        assert_plain(out)


def test_a_flat_curve_gains_nothing_and_has_no_cliff():
    out = summarize_accuracy(range(6), [0.5] * 6)
    assert out["gain"] == 0.0 and out["final_gain"] == 0.0
    assert out["theta"] == 0.0  # no gain, and a flat curve shows no noise
    assert out["cliff"] is False and out["cliff_status"] == "none"


def test_running_run_gets_provisional_verdict_only_when_already_below():
    # Down for only two evaluations: finished, it would be a cliff; running, no verdict yet.
    values, se = [0.2, 0.4, 0.6, 0.7, 0.65, 0.2, 0.2], [0.02] * 8
    assert summarize_accuracy(range(7), values, se=se[:7])["cliff_status"] == "cliff"
    early = summarize_accuracy(range(7), values, se=se[:7], running=True)
    assert early["cliff"] is False and early["cliff_onset"] is None
    assert early["cliff_status"] == "none" and early["running"] is True
    # Down for the last three evaluations (final_window): a provisional cliff from step 5.
    later = summarize_accuracy(range(8), values + [0.2], se=se, running=True)
    assert later["cliff"] is True and later["cliff_onset"] == 5
    assert later["cliff_status"] == "provisional"


def test_running_run_that_is_fine_is_not_a_cliff():
    out = summarize_accuracy(range(5), [0.2, 0.3, 0.4, 0.5, 0.5], running=True)
    assert out["cliff"] is False and out["cliff_status"] == "none"


# --- amplification -----------------------------------------------------------------------------

# 20 points: the baseline is the first 4 (20%): median 1.0, MAD 0.05, limit 1.15.
NOISY = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.0, 1.02, 0.98]


def test_amplification_needs_three_consecutive_points_above_the_limit():
    values = NOISY + [1.2, 1.3, 1.0, 1.2, 1.3, 1.4, 1.5, 1.0, 1.0, 1.0]
    base = amplification_baseline(range(20), values)
    assert base["median"] == 1.0 and base["mad"] == pytest.approx(0.05)
    assert base["limit"] == pytest.approx(1.15) and base["n_baseline"] == 4
    assert amplification_onset(range(0, 200, 10), values) == 130  # the first of the three


def test_two_points_above_the_limit_are_not_amplification():
    values = NOISY + [1.2, 1.3, 1.0, 1.2, 1.3, 1.0, 1.2, 1.3, 1.0, 1.0]
    assert amplification_onset(range(20), values) is None
    assert amplification_onset(range(20), values, consecutive=2) == 10


def test_amplification_skips_missing_values():
    values = NOISY + [1.0, 1.2, None, 1.3, float("nan"), 1.4, 1.0, 1.0, 1.0, 1.0]
    assert amplification_onset(range(20), values) == 11


def test_a_constant_baseline_does_not_flag_small_wobbles():
    # MAD = 0: the floor (1% of the median) puts the limit at 1.03, not at 1.0.
    values = [1.0] * 5 + [1.02, 1.01, 1.02, 1.02, 1.01]
    base = amplification_baseline(range(10), values)
    assert base["mad"] == 0.0 and base["limit"] == pytest.approx(1.03)
    assert amplification_onset(range(10), values) is None
    assert amplification_onset(range(10), [1.0] * 5 + [1.03] * 5) is None  # must exceed it
    assert amplification_onset(range(10), [1.0] * 5 + [1.5] * 5) == 5


def test_the_baseline_has_at_least_three_points():
    assert amplification_baseline(range(5), [1, 2, 3, 4, 5])["n_baseline"] == 3
    assert amplification_baseline(range(100), [1.0] * 100)["n_baseline"] == 20
    assert amplification_onset([0, 1], [1.0, 9.0]) is None


def test_amplification_thresholds_are_parameters():
    values = NOISY + [1.12] * 10  # above median + 2 × MAD = 1.10, below the default 1.15
    assert amplification_onset(range(20), values) is None
    assert amplification_onset(range(20), values, k_mad=2.0) == 10


# --- capture -------------------------------------------------------------------------------------


def test_capture_needs_a_share_above_threshold_in_most_of_the_last_half():
    steps = list(range(20))
    # Last half = steps 10–19; the generator is above .6 in 6 of 10 of them.
    gen = [0.5] * 10 + [0.7] * 6 + [0.5] * 4
    shares = {"generator": gen, "aggregator": [1 - g for g in gen]}
    assert capture(steps, shares) == "generator"
    assert capture_fractions(steps, shares) == {"generator": 0.6, "aggregator": 0.0}


def test_half_of_the_last_half_is_not_a_majority():
    steps = list(range(20))
    gen = [0.9] * 10 + [0.7] * 5 + [0.5] * 5  # the first half does not count
    assert capture(steps, {"generator": gen, "aggregator": [1 - g for g in gen]}) is None


def test_a_share_of_exactly_the_threshold_does_not_capture():
    shares = {"generator": [0.6] * 4, "aggregator": [0.4] * 4}
    assert capture(range(4), shares, min_steps=4) is None
    assert capture(range(4), {"generator": [0.6] * 4}, threshold=0.55, min_steps=4) == "generator"


def test_capture_counts_steps_where_any_role_logged():
    # Step 3 has no shares at all and is not a logged step; of the 8 logged steps the last half
    # is steps 5, 6, 7, 8, where the generator (missing at 7) is above .6 three times.
    steps = list(range(9))
    gen = [0.5, 0.5, 0.5, None, 0.5, 0.7, 0.7, None, 0.7]
    agg = [0.5, 0.5, 0.5, None, 0.5, 0.3, 0.3, 0.1, 0.3]
    assert capture(steps, {"generator": gen, "aggregator": agg}, min_steps=8) == "generator"


def test_capture_of_nothing_is_none():
    assert capture([], {}) is None
    assert capture([], {"generator": []}) is None


# --- one run -----------------------------------------------------------------------------------


def _run_series(gen_norm, agg_norm, gen_share=None):
    steps = list(range(0, 90, 10))
    series = {
        "eval/accuracy": (STEPS, CLIFF),  # cliff onset at step 50
        "role/generator/grad_norm": (steps, gen_norm),
        "role/aggregator/grad_norm": (steps, agg_norm),
        "role/aggregator/tokens": (steps, [1.0] * 9),
        "policy/shared/grad_norm": (steps, gen_norm),
        "train/reward": (steps, [0.1] * 9),
    }
    if gen_share is not None:
        series["role/generator/grad_share"] = (steps, gen_share)
        series["role/aggregator/grad_share"] = (steps, [1 - g for g in gen_share])
    return series


def test_lead_is_positive_when_amplification_comes_first():
    flat = [1.0, 1.0, 1.0]
    gen = flat + [5.0] * 6  # onset at step 30: twenty steps before the cliff
    agg = flat + [1.0] * 4 + [5.0, 5.0]  # only two points above: never
    out = summarize_run(_run_series(gen, agg))
    assert out["roles"] == ["aggregator", "generator"]
    assert out["amplification"] == {"aggregator": None, "generator": 30}
    assert out["lead"] == {"aggregator": None, "generator": 20}
    assert out["policy_amplification"] == {"shared": 30}
    assert out["accuracy"]["cliff_onset"] == 50
    assert_plain(out)


def test_lead_is_negative_when_amplification_comes_after_the_cliff():
    flat = [1.0] * 6
    out = summarize_run(_run_series(flat + [5.0] * 3, flat + [1.0] * 3))
    assert out["amplification"]["generator"] == 60
    assert out["lead"]["generator"] == -10


def test_capture_is_computed_for_shared_or_unspecified_sharing_only():
    norms = [1.0] * 9
    series = _run_series(norms, norms, gen_share=[0.5] * 4 + [0.8] * 5)
    assert summarize_run(series, capture_min_steps=9)["capture"] == "generator"
    shared = summarize_run(series, sharing="shared", capture_min_steps=9)
    assert shared["capture_fractions"]["generator"] == 1.0
    isolated = summarize_run(series, sharing="per_role", capture_min_steps=9)
    assert isolated["capture"] is None and isolated["capture_fractions"] == {}


def test_summarize_run_passes_thresholds_on():
    norms = [1.0] * 9
    out = summarize_run(_run_series(norms, norms), running=True, min_drop=0.5)
    assert out["accuracy"]["threshold"] == pytest.approx(0.2) and out["accuracy"]["running"]
    with pytest.raises(TypeError, match="unknown threshold"):
        summarize_run({}, min_dorp=0.5)


def test_a_run_without_evaluations_still_summarises():
    out = summarize_run({"role/solver/grad_norm": ([0, 1, 2, 3], [1.0, 1.0, 1.0, 9.0])})
    assert out["accuracy"]["base"] is None and out["accuracy"]["cliff"] is False
    assert out["roles"] == ["solver"] and out["lead"] == {"solver": None}
    assert_plain(out)


# --- across seeds ------------------------------------------------------------------------------


def test_student_t_quantiles_match_the_tables():
    for df, expected in [
        (1, 12.7062),
        (2, 4.3027),
        (4, 2.7764),
        (9, 2.2622),
        (29, 2.0452),
        (120, 1.9799),
        (5000, 1.9604),
    ]:
        assert student_t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)
    assert student_t_quantile(0.95, 10) == pytest.approx(1.8125, abs=1e-4)
    assert student_t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=1e-4)


def test_mean_ci_follows_the_t_interval():
    out = mean_ci([0.1, 0.2, 0.3, None, float("nan")])
    half = 4.302653 * 0.1 / math.sqrt(3)  # t(.975, 2) × sd / √n, sd = 0.1
    assert isinstance(out, Estimate)
    assert out.n == 3 and out.mean == pytest.approx(0.2) and out.df == 2
    assert out.sd == pytest.approx(0.1) and out.se == pytest.approx(0.1 / math.sqrt(3))
    assert out.half_width == pytest.approx(half, rel=1e-6)
    assert (out.low, out.high) == pytest.approx((0.2 - half, 0.2 + half), rel=1e-6)
    assert mean_ci([0.4]) == Estimate(n=1, mean=0.4)
    assert mean_ci([0.4]).half_width is None
    assert mean_ci([]) == Estimate(n=0)


def _summary(gain, cliff_status="none", captured=None, lead=None):
    acc = {
        "base": 0.2,
        "peak": 0.2 + gain,
        "final": 0.2 + gain / 2,
        "gain": gain,
        "final_gain": gain / 2,
        "cliff_status": cliff_status,
    }
    return {"accuracy": acc, "capture": captured, "lead": lead or {}}


def test_summarize_cells_gives_means_intervals_and_cliff_fractions():
    shared = {"workflow": "voting", "task": "math", "model": "tiny-s", "sharing": "shared"}
    isolated = {**shared, "sharing": "per_role"}
    runs = [
        {"cell": shared, "seed": 2, "summary": _summary(0.3, "cliff", "generator", {"g": 10})},
        {"cell": isolated, "seed": 0, "summary": _summary(0.5, "cliff", "generator")},
        {"cell": shared, "seed": 0, "summary": _summary(0.1, "none", "generator", {"g": 20})},
        {"cell": shared, "seed": 1, "summary": _summary(0.2, "insufficient", None, {"g": None})},
    ]
    rows = summarize_cells(runs)
    assert [r.sharing for r in rows] == ["shared", "per_role"]
    row = rows[0]
    assert row.n_seeds == 3 and row.seeds == [0, 1, 2]
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert row.gain.mean == pytest.approx(0.2)
    assert (row.gain.low, row.gain.high) == pytest.approx((0.2 - half, 0.2 + half))
    assert row.final_gain.mean == pytest.approx(0.1)
    assert row.final_gain.high - row.final_gain.mean == pytest.approx(half / 2)
    assert row.base == pytest.approx(0.2) and row.peak == pytest.approx(0.4)
    # The seed with too few evaluations has no verdict: one cliff in two judged seeds.
    assert (row.n_cliffs, row.n_judged, row.cliff_fraction) == (1, 2, 0.5)
    assert row.capture == "generator" and row.capture_counts == {"generator": 2}
    assert row.lead_mean == {"g": 15.0}
    single = rows[1]
    assert single.n_seeds == 1 and single.gain.mean == 0.5
    assert single.gain.low is None and single.gain.high is None
    assert single.capture is None and single.capture_counts == {}
    assert single.cliff_fraction == 1.0
    assert_plain([r.as_dict() for r in rows])


def test_a_cell_that_degraded_says_so_beside_its_cliffs():
    """A seed that fell below its base with no learned peak is no cliff, but the cell's
    cliff column must not read as healthy ("0/1" beside a collapsed run, once)."""
    cell = {"workflow": "voting", "task": "math", "model": "tiny-s", "sharing": "per_role"}
    verdicts = ["degradation", "none", "cliff", "insufficient"]
    runs = [
        {"cell": cell, "seed": s, "summary": _summary(0.1, v, None)} for s, v in enumerate(verdicts)
    ]
    (row,) = summarize_cells(runs)
    assert (row.n_cliffs, row.n_degraded, row.n_judged) == (1, 1, 3)
    assert row.cliffs_text == "1/3 · 1 degraded"
    (fine,) = summarize_cells(runs[1:2])
    assert fine.cliffs_text == "0/1" and fine.n_degraded == 0
    (none,) = summarize_cells(runs[3:])
    assert none.cliffs_text == "—"


def test_a_cells_plain_dict_keeps_its_keys_and_their_order():
    # `analyze --json` prints this dict and the panel's CSV takes its columns from it.
    cell = {"workflow": "voting", "task": "math", "model": "tiny-s", "sharing": "per_role"}
    runs = [{"cell": cell, "seed": s, "summary": _summary(0.1 * s, "none", None)} for s in (1, 2)]
    (row,) = summarize_cells(runs)
    plain = row.as_dict()
    assert list(plain) == [
        *cell,
        "n_seeds",
        "seeds",
        "gain_mean",
        "gain_low",
        "gain_high",
        "gain_n",
        "final_gain_mean",
        "final_gain_low",
        "final_gain_high",
        "final_gain_n",
        "base_mean",
        "peak_mean",
        "final_mean",
        "n_cliffs",
        "n_provisional",
        "n_judged",
        "cliff_fraction",
        "capture",
        "capture_counts",
        "lead_mean",
        "n_degraded",
    ]
    assert plain["gain_mean"] == row.gain.mean and plain["gain_n"] == 2
    assert plain["peak_mean"] == row.peak and plain["seeds"] == [1, 2]


# --- downsampling --------------------------------------------------------------------------------


def test_downsample_keeps_extremes_first_and_last():
    rng = np.random.default_rng(0)
    values = rng.normal(0.0, 1.0, 1000)
    values[500], values[700] = 100.0, -100.0
    out = downsample(list(range(1000)), values.tolist(), 20)
    assert len(out["steps"]) <= 20
    assert out["steps"][0] == 0 and out["steps"][-1] == 999
    assert {500, 700} <= set(out["steps"])
    assert out["steps"] == sorted(set(out["steps"]))
    for step, value in zip(out["steps"], out["values"], strict=True):
        assert value == values[step]
    assert_plain(out)


def test_downsample_respects_max_points():
    for n in (3, 10, 57, 1000):
        for max_points in (1, 2, 3, 4, 5, 10, 99):
            out = downsample(range(n), [float(i % 7) for i in range(n)], max_points)
            assert len(out["steps"]) == len(out["values"]) <= max(max_points, 0)
            if n > max_points:
                assert out["steps"][-1] == n - 1
    assert downsample(range(10), [1.0] * 10, 1) == {"steps": [9], "values": [1.0]}


def test_downsample_zero_returns_everything_sorted_and_unique():
    out = downsample([3, 1, 2, 2], [1.0, None, float("nan"), 5.0], 0)
    assert out == {"steps": [1, 2, 3], "values": [None, 5.0, 1.0]}
    assert downsample([], [], 10) == {"steps": [], "values": []}
    with pytest.raises(ValueError):
        downsample([1], [1.0], -1)


def test_downsample_ignores_missing_values_unless_a_bucket_has_nothing_else():
    values = [0.0] + [None] * 10 + [1.0, 5.0, 2.0] + [None] * 10 + [0.0]
    out = downsample(range(len(values)), values, 8)  # 3 buckets of 8 interior points
    assert 12 in out["steps"] and len(out["steps"]) <= 8
    assert None in out["values"]  # the all-missing first bucket shows as a gap


def test_downsample_is_fast_on_long_series():
    n = 200_000
    values = np.sin(np.arange(n) / 1000.0)
    values[123_456] = 7.0
    out = downsample(np.arange(n), values, 500)
    assert 123_456 in out["steps"] and len(out["steps"]) <= 500


# --- the analyze command -----------------------------------------------------------------------


def _write_run(path, seed, accuracy, steps=9, sharing="per_role"):
    path.mkdir(parents=True)
    config = {
        "workflow": "voting",
        "task": "math",
        "model": "tiny-s",
        "sharing": sharing,
        "seed": seed,
        "steps": steps,
    }
    (path / "config.json").write_text(json.dumps(config))
    lines = []
    for i, (step, value) in enumerate(zip(STEPS, accuracy, strict=True)):
        lines.append({"step": step, "key": "eval/accuracy", "value": value})
        norm = 1.0 if i < 3 else 5.0
        lines.append({"step": i, "key": "role/generator/grad_norm", "value": norm})
        lines.append({"step": i, "key": "role/aggregator/grad_norm", "value": 1.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_analyze_dirs_summarises_each_run_directory(tmp_path):
    _write_run(tmp_path / "a", 0, CLIFF, steps=80)
    results = run_report.analyze_dirs([tmp_path / "a"])
    (run,) = results
    assert run["name"] == "a" and run["seed"] == 0 and run["complete"] is True
    assert run["cell"] == {
        "workflow": "voting",
        "task": "math",
        "model": "tiny-s",
        "sharing": "per_role",
    }
    summary = run["summary"]
    assert summary["accuracy"]["cliff_onset"] == 50
    assert summary["amplification"] == {"aggregator": None, "generator": 3}
    assert summary["lead"]["generator"] == 47
    assert summary["capture"] is None
    assert_plain(results)


def test_analyze_treats_a_short_run_as_running_and_null_as_missing(tmp_path):
    accuracy = CLIFF[:6] + [None, None, None]  # cliff so far: only .3 at step 50
    _write_run(tmp_path / "b", 1, accuracy, steps=500)
    (run,) = run_report.analyze_dirs([tmp_path / "b"])
    assert run["complete"] is False and run["last_step"] == 80
    assert run["summary"]["accuracy"]["n_evals"] == 6
    assert run["summary"]["accuracy"]["cliff_status"] == "none"


def test_format_report_prints_runs_cells_and_json(tmp_path):
    _write_run(tmp_path / "s0", 0, CLIFF, steps=80)
    _write_run(tmp_path / "s1", 1, [0.2, 0.4, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7], steps=80)
    results = run_report.analyze_dirs([tmp_path / "s0", tmp_path / "s1", tmp_path / "nope"])
    text = run_report.format_report(results)
    assert "s0" in text and "yes @50" in text and "generator @3 (lead +47)" in text
    assert "error: no metrics.jsonl" in text
    assert "gain [95% CI]" in text and "1/2" in text  # the cell table: one cliff in two seeds
    data = json.loads(run_report.format_report(results, as_json=True))
    assert [r["name"] for r in data["runs"]] == ["s0", "s1", "nope"]
    assert data["cells"][0]["n_seeds"] == 2 and data["cells"][0]["cliff_fraction"] == 0.5


def test_analyze_command_exits_nonzero_when_a_directory_fails(tmp_path, capsys):
    _write_run(tmp_path / "a", 0, CLIFF, steps=80)
    assert trainer_cli(["analyze", str(tmp_path / "a"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["seed"] == 0
    assert trainer_cli(["analyze", str(tmp_path / "missing")]) == 1
