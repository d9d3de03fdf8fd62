"""Series holding NaN and ±inf: MLflow stores them, and a NaN loss is itself
a signal. Downsampling keeps every stretch that held one (as a gap, JSON's None); the radar
raises an alert on a non-finite training loss or reward; every number the analysis computes
(peaks, cliffs, onsets, statistics, bands) ignores them, giving what the finite points alone
give."""

import json
import math

import numpy as np
import pytest

from analysis.bands import seed_bands
from analysis.cliffs import summarize_accuracy
from analysis.downsample import downsample
from analysis.gaps import gap_marks, lone_points
from analysis.radar import non_finite_events, radar
from analysis.runs import summarize_run
from analysis.smoothing import centred_mean, smooth_series
from analysis.stats import t_mean_ci

NAN, INF = math.nan, math.inf
STEPS = [0, 10, 20, 30, 40, 50, 60, 70, 80]
CLIFF = [0.2, 0.4, 0.6, 0.7, 0.65, 0.3, 0.25, 0.2, 0.2]


def with_odd(steps, values, odd):
    """`(steps, values)` with extra points at `odd` {step: non-finite value} between them."""
    points = dict(zip(steps, values, strict=True)) | odd
    order = sorted(points)
    return order, [points[s] for s in order]


def strict_json(obj):
    return json.loads(json.dumps(obj, allow_nan=False))


# --- downsampling --------------------------------------------------------------------------------


def test_a_gap_inside_a_bucket_of_finite_points_is_kept_and_the_extremes_too():
    values = np.sin(np.arange(1000) / 50.0)
    values[500], values[700] = 100.0, -100.0
    values[123], values[456], values[789] = NAN, INF, -INF
    out = downsample(range(1000), values, 20)
    assert len(out["steps"]) <= 20
    assert {0, 500, 700, 999, 123, 456, 789} <= set(out["steps"])
    by_step = dict(zip(out["steps"], out["values"], strict=True))
    assert by_step[123] is None and by_step[456] is None and by_step[789] is None
    assert by_step[500] == 100.0 and by_step[700] == -100.0
    # Kept points are points of the series, never an average of several.
    for step, value in by_step.items():
        assert value is None or value == values[step]
    assert strict_json(out) == out


def test_every_bucket_that_held_a_gap_shows_one_within_the_budget():
    n, max_points = 10_000, 302  # 100 buckets of 99.98 interior points
    values = np.cos(np.arange(n) / 300.0)
    gaps = np.arange(37, n - 1, 211)  # 48 gaps, each in its own bucket
    values[gaps] = NAN
    out = downsample(np.arange(n), values, max_points)
    assert len(out["steps"]) <= max_points
    kept_gaps = {s for s, v in zip(out["steps"], out["values"], strict=True) if v is None}
    assert kept_gaps == set(gaps.tolist())


def test_a_series_of_mostly_gaps_stays_within_the_budget():
    values = [NAN if i % 3 else float(i) for i in range(3001)]
    for max_points in (2, 3, 4, 5, 8, 50, 500):
        out = downsample(range(3001), values, max_points)
        assert len(out["steps"]) <= max_points
        assert out["steps"][0] == 0 and out["steps"][-1] == 3000
        if max_points >= 3:
            assert None in out["values"], max_points


@pytest.mark.parametrize("max_points", [3, 4])
def test_a_plot_of_few_points_keeps_the_first_gap_over_the_peak(max_points):
    values = [0.0, 1.0, 9.0, INF, 2.0, 0.0]
    out = downsample(range(6), values, max_points)
    assert out == {"steps": [0, 3, 5], "values": [0.0, None, 0.0]}
    # Without the gap, three points keep the peak, as before.
    assert downsample(range(5), [0.0, 1.0, 9.0, 2.0, 0.0], 3)["steps"] == [0, 2, 4]


def test_every_point_comes_back_as_json_when_nothing_is_thinned():
    out = downsample([0, 1, 2, 3], [1.0, NAN, INF, -INF], 0)
    assert out == {"steps": [0, 1, 2, 3], "values": [1.0, None, None, None]}
    assert strict_json(out) == out


# --- the radar's alert -------------------------------------------------------------------------


def test_a_non_finite_loss_or_reward_is_an_alert_at_its_first_step():
    series = {
        "train/loss": ([0, 1, 2, 3, 4], [0.9, 0.8, NAN, 0.7, INF]),
        "train/reward": ([0, 1, 2, 3], [0.1, 0.2, 0.3, None]),  # a gap: how the store keeps NaN
        "train/kl": ([0, 1], [NAN, NAN]),  # not a figure whose NaN is an alert
    }
    events = radar(series)["events"]
    assert [(e["kind"], e["role"], e["key"], e["step"], e["seen_at"]) for e in events] == [
        ("non_finite_loss", None, "train/loss", 2, 2),
        ("non_finite_reward", None, "train/reward", 3, 3),
    ]
    assert all(not e["provisional"] and e["value"] is None for e in events)
    assert all(e["limit"] is None for e in events)
    strict_json(events)


def test_the_alert_is_causal_and_unmoved_by_later_points():
    steps = list(range(30))
    loss = [1.0 / (s + 1) for s in steps]
    loss[12] = -INF
    first = non_finite_events({"train/loss": (steps[:13], loss[:13])})
    assert non_finite_events({"train/loss": (steps, loss)}) == first
    assert non_finite_events({"train/loss": (steps[:12], loss[:12])}) == []
    # Unsorted input (the store's reads are): still the first step.
    assert non_finite_events({"train/loss": (steps[::-1], loss[::-1])}) == first


def test_finite_figures_raise_no_alert():
    assert non_finite_events({"train/loss": ([0, 1], [0.5, 0.4]), "train/reward": ([], [])}) == []
    with pytest.raises(ValueError, match="train/loss"):
        non_finite_events({"train/loss": ([0, 1], [0.5])})


def test_non_finite_points_change_no_other_radar_event():
    acc_steps, acc = with_odd(STEPS, CLIFF, {15: NAN, 45: INF, 75: -INF})
    clean = {"eval/accuracy": (STEPS, CLIFF)}
    odd = {"eval/accuracy": (acc_steps, acc)}
    assert radar(odd, running=False)["events"] == radar(clean, running=False)["events"]


# --- numbers the analysis computes ignore them ---------------------------------------------------


def test_peaks_and_cliffs_ignore_non_finite_evaluations():
    base = summarize_accuracy(STEPS, CLIFF)
    for odd in ({15: NAN}, {15: INF}, {35: -INF, 85: INF}, {5: NAN, 25: INF, 65: -INF}):
        out = summarize_accuracy(*with_odd(STEPS, CLIFF, odd))
        assert out == base, odd
    assert base["peak"] == 0.7 and base["cliff"] and base["cliff_onset"] == 50
    strict_json(base)


def test_a_non_finite_standard_error_gives_no_evidence_and_no_error():
    se = [0.02] * len(STEPS)
    se[3] = INF
    out = summarize_accuracy(STEPS, CLIFF, se=se)
    assert out["peak"] == 0.7 and out["cliff_onset"] == 50
    strict_json(out)


def test_an_amplification_onset_ignores_non_finite_gradient_norms():
    steps = list(range(50))
    norms = [1.0 + 0.01 * (s % 3) for s in steps[:30]] + [8.0] * 20
    clean = summarize_run({"role/gen/grad_norm": (steps, norms)})
    odd_norms = list(norms)
    odd_norms[5], odd_norms[20], odd_norms[35] = INF, NAN, -INF
    odd = summarize_run({"role/gen/grad_norm": (steps, odd_norms)})
    assert clean["amplification"] == {"gen": 30}
    # The odd points are missing, so the onset is the first finite step past the baseline.
    assert odd["amplification"] == clean["amplification"]
    strict_json(odd)


def test_statistics_bands_and_smoothing_ignore_non_finite_values():
    assert t_mean_ci([0.1, NAN, 0.2, INF, 0.3, -INF]) == t_mean_ci([0.1, 0.2, 0.3])
    runs = [([0, 1, 2], [0.1, NAN, 0.3]), ([0, 1, 2], [0.3, 0.5, INF])]
    bands = seed_bands(runs)
    assert bands["steps"] == [0, 1, 2] and bands["n"] == [2, 1, 1]
    assert bands["mean"] == pytest.approx([0.2, 0.5, 0.3])
    strict_json(bands)
    s, v = smooth_series([0, 1, 2, 3], [1.0, INF, 3.0, NAN], method="ema", alpha=0.5)
    assert s.tolist() == [0, 2] and v.tolist() == [1.0, 2.0]
    # The compare page's display smoothing keeps a gap a gap, never averaging it in.
    assert centred_mean([1.0, None, 3.0, 5.0], 3) == [1.0, None, 4.0, 4.0]


def test_capture_ignores_non_finite_shares():
    steps = list(range(40))
    shares = {"role/a/grad_share": [0.9] * 40, "role/b/grad_share": [0.1] * 40}
    odd = {key: list(values) for key, values in shares.items()}
    odd["role/a/grad_share"][5], odd["role/a/grad_share"][30] = NAN, INF
    odd["role/b/grad_share"][12] = -INF
    clean = summarize_run({key: (steps, values) for key, values in shares.items()})
    out = summarize_run({key: (steps, values) for key, values in odd.items()})
    assert out["capture"] == clean["capture"] == "a"
    assert out["capture_fractions"] == clean["capture_fractions"] == {"a": 1.0, "b": 0.0}


def test_plots_mark_each_stretch_of_gaps_once_at_a_finite_neighbours_height():
    values = [None, 1.0, 2.0, None, None, 3.0, None]
    assert gap_marks(range(7), values) == [(0, 1.0), (3, 2.0), (6, 3.0)]
    assert gap_marks([0, 1], [None, None]) == [(0, None)]  # no height to give
    assert gap_marks([0, 1], [0.5, 0.6]) == []
    assert lone_points([None, 1.0, None, 2.0, 3.0]) == [False, True, False, False, False]
