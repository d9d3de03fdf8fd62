"""The live radar on hand-built runs whose events are worked out in the comments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.amplification import amplification_onset
from analysis.cliffs import summarize_accuracy
from analysis.radar import prefix_cliff_statuses, radar

ROOT = Path(__file__).resolve().parents[2]
N = 200
STEPS = list(range(N))
ACC_STEPS = list(range(0, N, 10))
# Peak .7 first at step 50, threshold .7 − max(.1, .5 × .5) = .45. The smoothed series is .7 at
# 110 (median .7 .7 .2) and .2 from 120: the fall starts at 120. Evaluations at 120…140 are
# the first three below, so the prefix ending at 140 is "provisional"; five evaluations at or
# after 120 are there at 160, which confirms it.
ACC = [0.2, 0.3, 0.4, 0.5, 0.6] + [0.7] * 7 + [0.2] * 8


def step_series(n, before, after, change):
    return [before if i < change else after for i in range(n)]


def full_run():
    return {
        "eval/accuracy": (ACC_STEPS, ACC),
        # Baseline: steps < .2 × 200 = 40, median 1, MAD 0 → limit 1 + 3 × .01 = 1.03.
        "role/gen/grad_norm": (STEPS, step_series(N, 1.0, 5.0, 100)),
        "role/agg/grad_norm": (STEPS, [1.0] * N),
        # Reference 2.0, limit 1.0: below from 150, five in a row by 154.
        "role/gen/entropy": (STEPS, step_series(N, 2.0, 0.5, 150)),
        "role/agg/entropy": (STEPS, [2.0] * N),
        # gen's share .9 from step 60. A prefix of m steps has m − 60 of its later
        # m − m//2 above .6; (m − 60)/(m − m//2) > .5 first at m = 81 (21/41): step 80.
        "role/gen/grad_share": (STEPS, step_series(N, 0.5, 0.9, 60)),
        "role/agg/grad_share": (STEPS, step_series(N, 0.5, 0.1, 60)),
        "train/frac_zero_std": (STEPS, step_series(N, 0.1, 0.9, 170)),
        "train/loss": (STEPS, [0.0] * N),
    }


def truncate(series, last_step):
    out = {}
    for key, (steps, values) in series.items():
        keep = [i for i, s in enumerate(steps) if s <= last_step]
        out[key] = ([steps[i] for i in keep], [values[i] for i in keep])
    return out


def brief(events):
    return [(e["kind"], e["role"], e["step"], e["seen_at"], e["provisional"]) for e in events]


def test_a_finished_run_shows_every_event_at_its_step():
    out = radar(full_run(), running=False, total_steps=N)
    assert brief(out["events"]) == [
        # Capture is the finished run's §6 verdict, seen at its end.
        ("capture", "gen", 80, 199, False),
        ("amplification", "gen", 100, 102, False),
        ("cliff", None, 120, 160, False),
        ("entropy_collapse", "gen", 150, 154, False),
        ("zero_std_groups", None, 170, 174, False),
    ]
    by_kind = {e["kind"]: e for e in out["events"]}
    assert by_kind["amplification"]["limit"] == pytest.approx(1.03)
    assert by_kind["amplification"]["value"] == 5.0
    assert by_kind["cliff"]["limit"] == pytest.approx(0.45) and by_kind["cliff"]["value"] == 0.2
    assert by_kind["entropy_collapse"]["limit"] == pytest.approx(1.0)
    assert by_kind["capture"]["value"] == 0.9 and by_kind["capture"]["limit"] == 0.6
    assert out["cliff_status"] == "cliff" and out["last_step"] == N - 1
    assert out["thresholds"]["cliff_confirm"] == 5 and out["thresholds"]["k_mad"] == 3.0
    json.dumps(out, allow_nan=False)


def test_a_cliff_is_provisional_until_enough_evaluations_follow():
    at_145 = radar(truncate(full_run(), 145), total_steps=N)
    cliffs = [e for e in at_145["events"] if e["kind"] == "cliff"]
    assert brief(cliffs) == [("cliff", None, 120, 140, True)]
    assert at_145["cliff_status"] == "provisional"
    # Before three evaluations are down (step 130), not even a provisional cliff.
    assert not [e for e in radar(truncate(full_run(), 135))["events"] if e["kind"] == "cliff"]
    at_165 = radar(truncate(full_run(), 165), total_steps=N)
    assert brief([e for e in at_165["events"] if e["kind"] == "cliff"]) == [
        ("cliff", None, 120, 160, False)
    ]


def test_calling_again_with_more_points_keeps_every_settled_event():
    series = full_run()
    final = radar(series, total_steps=N)
    before: list = []
    for t in range(N):
        now = radar(truncate(series, t), total_steps=N)["events"]
        settled = [e for e in before if not e["provisional"]]
        assert all(e in now for e in settled), t
        assert all(e in final["events"] for e in now if not e["provisional"]), t
        before = now
    # A running run shows what the finished one shows; only capture, a verdict on the last
    # half of the run, stays provisional until the run ends.
    finished = radar(series, running=False, total_steps=N)["events"]
    assert [{**e, "provisional": False} for e in final["events"]] == finished
    assert [e["kind"] for e in final["events"] if e["provisional"]] == ["capture"]


def test_the_same_points_give_the_same_events():
    series = full_run()
    assert radar(series, total_steps=N) == radar(series, total_steps=N)
    shuffled = {k: (list(reversed(s)), list(reversed(v))) for k, (s, v) in series.items()}
    assert radar(shuffled, total_steps=N) == radar(series, total_steps=N)


def test_a_dip_that_recovers_drops_its_provisional_cliff():
    acc = [0.2, 0.5, 0.7, 0.7, 0.2, 0.2, 0.2, 0.7, 0.7, 0.7]
    steps = list(range(0, 100, 10))
    se = [0.02] * 10  # evaluation noise far below the dip, as a Troupe run logs it
    dipped = radar({"eval/accuracy": (steps[:7], acc[:7]), "eval/accuracy_se": (steps, se)})
    assert brief(dipped["events"]) == [("cliff", None, 40, 60, True)]
    recovered = radar({"eval/accuracy": (steps, acc), "eval/accuracy_se": (steps, se)})
    assert recovered["events"] == [] and recovered["cliff_status"] == "none"


def test_a_confirmed_cliff_stays_an_alert_after_the_run_recovers():
    # Down for five evaluations (40…80), confirmed at 80; back up from 90.
    acc = [0.2, 0.5, 0.7, 0.7] + [0.2] * 5 + [0.7] * 5
    steps = list(range(0, 140, 10))
    out = radar({"eval/accuracy": (steps, acc)})
    assert brief(out["events"]) == [("cliff", None, 40, 80, False)]
    assert out["cliff_status"] == "none"
    # A second fall after the recovery is a second cliff.
    acc2 = acc + [0.2] * 5
    out2 = radar({"eval/accuracy": (list(range(0, 190, 10)), acc2)})
    assert brief(out2["events"]) == [
        ("cliff", None, 40, 80, False),
        ("cliff", None, 140, 180, False),
    ]


@pytest.mark.parametrize(
    "median_window, final_window, min_drop", [(3, 3, 0.1), (1, 1, 0.1), (5, 3, 0.05), (3, 4, 0.2)]
)
def test_the_prefix_scan_agrees_with_summarize_accuracy_on_every_prefix(
    median_window, final_window, min_drop
):
    rng = np.random.default_rng(7)  # fixed inputs; the assertion holds for any series
    kw = {"median_window": median_window, "final_window": final_window, "min_drop": min_drop}
    for _ in range(40):
        n = int(rng.integers(1, 30))
        steps = np.sort(rng.choice(1000, size=n, replace=False)).tolist()
        values = np.round(rng.random(n), 1).tolist()  # ties and exact-threshold values
        rows = prefix_cliff_statuses(steps, values, **kw)
        for j, row in enumerate(rows):
            want = summarize_accuracy(steps[: j + 1], values[: j + 1], running=True, **kw)
            assert row["step"] == steps[j]
            assert row["cliff_status"] == want["cliff_status"], (steps, values, j)
            assert row["cliff_onset"] == want["cliff_onset"]
            assert row["threshold"] == pytest.approx(want["threshold"])


def test_amplification_on_a_finished_run_is_the_section_6_onset():
    rng = np.random.default_rng(3)
    values = (1 + 0.05 * rng.standard_normal(N)).tolist()
    values[120:] = [v + 2 for v in values[120:]]
    series = {"role/gen/grad_norm": (STEPS, values)}
    want = amplification_onset(STEPS, values)
    assert want is not None
    events = radar(series, running=False, total_steps=N)["events"]
    assert [e["step"] for e in events] == [want]
    # Without the planned length the baseline is 20% of what exists: provisional while running.
    live = radar(series, running=True)["events"]
    assert brief(live) == [("amplification", "gen", want, N - 1, True)]
    assert radar(series, running=False)["events"][0]["provisional"] is False


def test_amplification_waits_for_the_baseline_to_be_complete():
    # The baseline is steps < 40; a rise at step 5 is not judged before step 40 is logged.
    values = [1.0] * 5 + [9.0] * 195
    series = {"role/gen/grad_norm": (STEPS, values)}
    assert radar(truncate(series, 39), total_steps=N)["events"] == []
    out = radar(truncate(series, 40), total_steps=N)["events"]
    # Baseline: five 1s and thirty-five 9s → median 9, MAD 0, limit 9.27: nothing above.
    assert out == []


def test_capture_is_only_looked_for_under_a_shared_policy():
    series = full_run()
    kinds = {e["kind"] for e in radar(series, sharing="per_role", total_steps=N)["events"]}
    assert "capture" not in kinds and "amplification" in kinds
    assert "capture" in {e["kind"] for e in radar(series, sharing="shared")["events"]}


def test_a_short_entropy_dip_or_a_zero_reference_is_no_collapse():
    dip = [2.0] * 50 + [0.5] * 4 + [2.0] * 46  # four in a row, five needed
    assert radar({"role/gen/entropy": (list(range(100)), dip)})["events"] == []
    zero = [0.0] * 100
    assert radar({"role/gen/entropy": (list(range(100)), zero)})["events"] == []
    # The radar's parameters change the answer as documented.
    out = radar({"role/gen/entropy": (list(range(100)), dip)}, entropy_consecutive=4)
    assert brief(out["events"]) == [("entropy_collapse", "gen", 50, 53, False)]


def test_zero_std_groups_need_a_sustained_run_above_the_threshold():
    values = [0.9, 0.9, 0.9, 0.9, 0.1] + [0.6] * 5
    out = radar({"train/frac_zero_std": (list(range(10)), values)})
    assert brief(out["events"]) == [("zero_std_groups", None, 5, 9, False)]
    assert (
        radar({"train/frac_zero_std": (list(range(10)), values)}, zero_std_threshold=0.6)["events"]
        == []
    )


def test_missing_values_and_empty_series_are_handled():
    assert radar({}) == {
        "events": [],
        "cliff_status": "insufficient",
        "last_step": None,
        "thresholds": radar({})["thresholds"],
    }
    out = radar(
        {
            "eval/accuracy": ([0, 10], [None, float("nan")]),
            "train/frac_zero_std": ([5, 7], [0.1, None]),
            "train/loss": ([9], [1.0]),  # not read by the radar
        }
    )
    assert out["events"] == [] and out["last_step"] == 5


def test_bad_thresholds_are_named():
    with pytest.raises(TypeError, match="unknown threshold 'cliff_confrim'"):
        radar({}, cliff_confrim=3)
    with pytest.raises(ValueError, match="entropy_consecutive"):
        radar({}, entropy_consecutive=0)
    with pytest.raises(ValueError, match="total_steps"):
        radar({}, total_steps=0)


def test_the_radar_bench_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "radar.py"), "--smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["events"] >= 5 and result["radar_ms"] > 0


def test_a_rise_inside_the_baseline_is_its_early_range_not_an_onset():
    # Baseline steps < 40 (thirty-seven 1s, three 9s → median 1, MAD 0): 1.03 by the MAD, but
    # the run already reached 9 in its early range, so the limit is 9 and nothing amplifies
    # (no false alarm). The same 9s just after the baseline are an onset, judged at their third.
    values = [1.0] * 37 + [9.0] * 3 + [1.0] * 160
    series = {"role/gen/grad_norm": (STEPS, values)}
    assert radar(truncate(series, 40), total_steps=N)["events"] == []
    assert radar(series, total_steps=N, running=False)["events"] == []
    assert amplification_onset(STEPS, values) is None
    later = {"role/gen/grad_norm": (STEPS, [1.0] * 40 + [9.0] * 3 + [1.0] * 157)}
    assert radar(truncate(later, 41), total_steps=N)["events"] == []
    out = radar(truncate(later, 42), total_steps=N)["events"]
    assert brief(out) == [("amplification", "gen", 40, 42, False)]
    assert out[0]["limit"] == pytest.approx(1.03)


@pytest.mark.parametrize(
    "series",
    [
        full_run(),
        {"role/gen/grad_norm": (STEPS, [1.0] * 40 + [9.0] * 3 + [1.0] * 157)},
    ],
)
def test_each_settled_event_first_appears_at_its_seen_at_step(series):
    final = [e for e in radar(series, total_steps=N)["events"] if e["kind"] != "capture"]
    assert final
    for event in final:
        assert not event["provisional"]
        assert event in radar(truncate(series, event["seen_at"]), total_steps=N)["events"]
        earlier = radar(truncate(series, event["seen_at"] - 1), total_steps=N)["events"]
        assert event not in earlier
