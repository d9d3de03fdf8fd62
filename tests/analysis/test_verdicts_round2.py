"""The second round of verdict rules on hand-built series: each series is one a researcher
met, and the comment says what the rule must answer and why (docs/analysis.md states the rules)."""

from __future__ import annotations

from collections import Counter

import pytest

from analysis.amplification import amplification_baseline, amplification_verdict
from analysis.capture import capture_verdict
from analysis.cliffs import cliff_label, summarize_accuracy
from analysis.radar import radar
from analysis.runs import summarize_run
from analysis.stats import main_effects, paired_effect

# --- 1. amplification needs a baseline of real signal ------------------------------------------


def test_a_baseline_of_zero_gradient_steps_is_too_few_steps_to_judge():
    # Twelve steps; the baseline is the first three (20%, at least 3): steps whose GRPO groups
    # all had zero advantage log a norm of 0 or float dust. The old limit was 3e-12, and 0.056
    # at step 4 "amplified" though step 1 had logged 0.106.
    steps = list(range(12))
    norms = [0.0, 0.106, 3e-12, 0.03, 0.056, 0.06, 0.058, 0.04, 0.05, 0.0, 0.03, 0.05]
    base = amplification_baseline(steps, norms)
    assert base["n_signal"] == 1 and base["limit"] is None
    verdict = amplification_verdict(steps, norms)
    assert verdict == {"onset": None, "status": "too_few_steps", "limit": None}
    out = summarize_run({"role/generator/grad_norm": (steps, norms)}, total_steps=12)
    assert out["amplification"] == {"generator": None}
    assert out["amplification_status"] == {"generator": "too_few_steps"}
    events = radar({"role/generator/grad_norm": (steps, norms)}, total_steps=12)["events"]
    assert not [e for e in events if e["kind"] == "amplification"]


def test_a_rise_the_early_range_already_contains_is_no_amplification():
    # Baseline (first 4 of 20): 0.106, 0.05, 0.05, 0.05 → median .05, MAD 0, so median + 3 ×
    # floor = .0515; but the run reached .106 at step 0, and .056–.06 never leaves that range.
    steps = list(range(20))
    norms = [0.106, 0.05, 0.05, 0.05] + [0.056, 0.06, 0.058] * 5 + [0.05]
    verdict = amplification_verdict(steps, norms)
    assert verdict["status"] == "none" and verdict["limit"] == pytest.approx(0.106)
    # A real rise past the early range is still an amplification.
    risen = norms[:10] + [0.3] * 10
    assert amplification_verdict(steps, risen)["onset"] == 10


def test_zero_steps_inside_the_baseline_do_not_count_as_its_signal():
    # Baseline of 4: one zero step and three real ones: median of the three real ones (1.0).
    steps = list(range(20))
    norms = [0.0, 1.0, 1.0, 1.0] + [1.0] * 10 + [2.0] * 6
    base = amplification_baseline(steps, norms)
    assert base["n_signal"] == 3 and base["median"] == 1.0
    assert amplification_verdict(steps, norms) == {
        "onset": 14,
        "status": "amplified",
        "limit": pytest.approx(1.03),
    }


# --- 2. capture: one verdict, one minimum of evidence ------------------------------------------


def _shares(gen):
    return {"generator": gen, "aggregator": [1 - g for g in gen]}


def test_capture_is_not_judged_below_ten_logged_steps():
    # Six logged steps with the generator on top in the last half: the run page said
    # "captured by generator" while the radar (10 steps at least) said nothing.
    gen = [0.5, 0.5, 0.5, 0.9, 0.9, 0.9]
    verdict = capture_verdict(range(6), _shares(gen))
    assert verdict["status"] == "too_few_steps" and verdict["role"] is None
    series = {
        "role/generator/grad_share": (list(range(6)), gen),
        "role/aggregator/grad_share": (list(range(6)), [1 - g for g in gen]),
    }
    out = summarize_run(series, sharing="shared")
    assert out["capture"] is None and out["capture_status"] == "too_few_steps"
    assert out["capture_fractions"] == {}
    assert not [e for e in radar(series, sharing="shared")["events"] if e["kind"] == "capture"]


def test_capture_from_ten_steps_is_the_same_on_the_summary_and_the_radar():
    gen = [0.5] * 5 + [0.9] * 7
    steps = list(range(12))
    series = {
        "role/generator/grad_share": (steps, gen),
        "role/aggregator/grad_share": (steps, [1 - g for g in gen]),
    }
    for upto in range(1, 13):
        part = {k: (s[:upto], v[:upto]) for k, (s, v) in series.items()}
        summary = summarize_run(part, sharing="shared", running=True)
        found = [e for e in radar(part, sharing="shared")["events"] if e["kind"] == "capture"]
        # One answer on every page: the radar has a capture event exactly when the summary
        # names a role, and never before 10 logged steps.
        assert bool(found) == (summary["capture"] is not None)
        if upto < 10:
            assert summary["capture_status"] == "too_few_steps"
        else:
            assert summary["capture"] == "generator" and found[0]["role"] == "generator"


def test_a_run_with_per_role_policies_has_no_capture_status():
    steps = list(range(12))
    series = {
        "role/generator/grad_share": (steps, [1.0] * 12),
        "role/aggregator/grad_share": (steps, [1.0] * 12),
    }
    out = summarize_run(series, sharing="per_role")
    assert out["capture"] is None and out["capture_status"] is None


# --- 4. a noise-sized bump does not decide cliff versus degradation ------------------------------


STEPS8 = [0, 1, 2, 3, 4, 5, 6, 7]


def test_a_bump_within_one_se_of_the_base_is_judged_as_the_base():
    # Base .156, a peak .180 at step 2 (+.024; SE of peak − base .038), then a collapse to 0.
    # The same collapse without the bump is degradation; so must this be.
    bumped = [0.156, 0.16, 0.180, 0.15, 0.0, 0.0, 0.0, 0.0]
    flat = [0.156, 0.15, 0.15, 0.15, 0.0, 0.0, 0.0, 0.0]
    se = [0.027] * 8  # √(.027² + .027²) = .038
    with_bump = summarize_accuracy(STEPS8, bumped, se=se)
    without = summarize_accuracy(STEPS8, flat, se=se)
    assert without["cliff_status"] == "degradation"
    assert with_bump["cliff_status"] == "degradation"
    assert with_bump["cliff"] is False and with_bump["degradation_onset"] == 4
    assert with_bump["cliff_test"]["reference"] == "base"
    assert with_bump["cliff_test"]["se_gain"] == pytest.approx(0.0382, abs=1e-4)
    assert with_bump["peak"] == 0.180  # still the best evaluation, as the pages show it
    assert "within 1 SE" in with_bump["evidence"]


def test_a_peak_beyond_one_se_is_a_learned_peak():
    # The same run with a peak of .25 (+.094, 2.5 SE): a cliff from a learned peak.
    values = [0.156, 0.2, 0.25, 0.2, 0.0, 0.0, 0.0, 0.0]
    out = summarize_accuracy(STEPS8, values, se=[0.027] * 8)
    assert out["cliff_status"] == "cliff" and out["cliff_onset"] == 4
    assert out["cliff_test"]["reference"] == "peak"


# --- 5. thresholds accuracy cannot reach ---------------------------------------------------------


def test_a_threshold_below_zero_cannot_judge_rather_than_say_none():
    # Peak .03 with an SE of .02 per evaluation: θ ≥ 2.5 × .028 puts the line at −.04. Nothing
    # can fall below it: the verdict is "cannot judge", which "none" would hide.
    values = [0.0, 0.01, 0.03, 0.02, 0.01, 0.02, 0.0, 0.01]
    out = summarize_accuracy(STEPS8, values, se=[0.02] * 8)
    assert out["threshold"] < 0
    assert out["cliff_status"] == "too_low" and out["cliff"] is False
    assert cliff_label(out) == "cannot judge: accuracy too low"
    assert "cannot judge" in out["evidence"]


def test_a_running_run_below_the_line_reads_as_provisional_not_none():
    # While training: final .042 under the line .075, but not down for the whole final
    # window yet. "none below 0.075" read as a contradiction; the label says it is pending.
    values = [0.05, 0.10, 0.15, 0.15, 0.12, 0.04, 0.1, 0.0, 0.025]
    steps = list(range(9))
    out = summarize_accuracy(steps, values, se=[0.01] * 9, running=True)
    assert out["cliff_status"] == "none" and out["final"] < out["threshold"]
    assert cliff_label(out) == "below the line: not judged yet"
    done = summarize_accuracy(steps[:5], values[:5], se=[0.01] * 5, running=True)
    assert cliff_label(done) == "none so far"


def test_every_status_has_one_label():
    assert cliff_label(None) == "no evaluations"
    degraded = summarize_accuracy(STEPS8, [0.3, 0.29, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1], se=[0.01] * 8)
    assert cliff_label(degraded) == f"degradation @{degraded['degradation_onset']}"


# --- 6. the radar never emits one event twice ----------------------------------------------------


@pytest.mark.parametrize("se", [None, 0.02])
@pytest.mark.parametrize("running", [True, False])
def test_a_degradation_that_re_arms_with_the_same_onset_is_one_event(se, running):
    # Down from the base at step 10; at step 60 one evaluation is back near the base, so the
    # prefix's last three are not all below ("none": the radar re-arms), but the rolling
    # median stays below and the next prefixes say "degradation" with the same onset, 10.
    # The radar raised it twice; the alerts' upsert then failed (CardinalityViolation).
    acc = [0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.45, 0.1, 0.1, 0.1, 0.1]
    steps = list(range(0, 10 * len(acc), 10))
    series = {"eval/accuracy": (steps, acc)}
    if se is not None:
        series["eval/accuracy_se"] = (steps, [se] * len(acc))
    events = radar(series, running=running)["events"]
    keys = Counter((e["kind"], e["role"], e["step"]) for e in events)
    assert keys == {("degradation", None, 10): 1}


# --- 3. statistics never pool cells that disagree ----------------------------------------------


def _run(workflow, seed, sharing, peak, status="none"):
    cell = {"workflow": workflow, "task": "math", "model": "tiny-s", "sharing": sharing}
    accuracy = {"peak": peak, "final": peak, "cliff_status": status}
    return {"cell": cell, "seed": seed, "summary": {"accuracy": accuracy}}


def _cell(workflow, effect, seeds, noise=(0.0, 0.004, -0.004)):
    runs = []
    for seed in range(seeds):
        base = 0.3 + 0.01 * seed
        runs.append(_run(workflow, seed, "shared", base))
        runs.append(_run(workflow, seed, "per_role", base + effect + noise[seed % 3]))
    return runs


def test_cells_at_plus_and_minus_ten_points_are_not_pooled_into_no_difference():
    # Each cell decided on its own (+.10 and −.10, SE ≈ .002); their mean is ≈ 0 with a
    # narrow interval, which read as "no difference seen". They disagree: no pooled interval.
    out = paired_effect([*_cell("voting", 0.10, 3), *_cell("eval_opt", -0.10, 3)])
    assert [c["peak"]["decision"] for c in out["cells"]] == ["second_higher", "first_higher"]
    pooled = out["overall"]["peak"]
    assert pooled["decision"] == "disagree" and pooled["verdict"] == "cells disagree: see each cell"
    assert pooled["low"] is None and pooled["high"] is None
    assert pooled["heterogeneity"]["p"] < 0.05 and pooled["heterogeneity"]["k"] == 2


def test_a_cell_with_one_seed_never_makes_the_headline():
    # One cell with 3 seeds at +.10, one with a single seed at −.30: the pooled figure is the
    # 3-seed cell alone, and says so.
    out = paired_effect([*_cell("voting", 0.10, 3), *_cell("eval_opt", -0.30, 1)])
    pooled = out["overall"]["peak"]
    assert pooled["n_cells"] == 1 and pooled["n_cells_present"] == 2
    assert pooled["mean"] == pytest.approx(0.10)
    assert pooled["verdict"] == "per_role higher (from 1 of 2 cells with 3+ seeds)"


def test_cells_that_agree_are_pooled_as_before():
    out = paired_effect([*_cell("voting", 0.10, 3), *_cell("eval_opt", 0.10, 3)])
    pooled = out["overall"]["peak"]
    assert pooled["decision"] == "second_higher" and pooled["low"] > 0.09
    assert not pooled["heterogeneity"]["disagree"]


def test_a_cliff_rate_with_no_cliffs_anywhere_is_no_cliffs():
    out = paired_effect([*_cell("voting", 0.10, 3), *_cell("eval_opt", 0.10, 3)])
    for effect in (out["cells"][0]["cliff"], out["overall"]["cliff"]):
        assert effect["decision"] == "no_cliffs" and effect["verdict"] == "no cliffs"
        assert effect["low"] is None and effect["more_needed"] is None


def test_main_effects_of_a_cliff_rate_with_no_cliffs_say_no_cliffs():
    runs = [*_cell("voting", 0.10, 3), *_cell("eval_opt", 0.10, 3)]
    for rows in main_effects(runs)["sharing"]["cliff"], main_effects(runs)["workflow"]["cliff"]:
        assert {(r["decision"], r["verdict"], r["low"]) for r in rows} == {
            ("no_cliffs", "no cliffs", None)
        }
