"""Statistics across seeds on hand-built experiments whose answers are known.

Effects are built far from any decision boundary (exactly zero, or many standard errors away),
so the assertions hold for any bootstrap stream, not just the one the fixed seed gives.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.intervals import Estimate
from analysis.proportions import wilson
from analysis.runs import summarize_run
from analysis.stats import (
    bootstrap_mean_ci,
    cell_stats,
    decide,
    lead_inputs,
    lead_test,
    main_effects,
    paired_effect,
    run_metrics,
    seeds_needed,
)

ROOT = Path(__file__).resolve().parents[2]


def make_run(seed, peak, final, status="none", **cell):
    axes = {"workflow": "voting", "task": "math", "model": "tiny-s", "sharing": "shared"}
    axes.update(cell)
    accuracy = {
        "peak": peak,
        "final": final,
        "gain": peak - 0.25,
        "final_gain": final - 0.25,
        "cliff_status": status,
    }
    return {"cell": axes, "seed": seed, "summary": {"accuracy": accuracy}}


# Exact binary fractions, so differences and their mean are exact in floating point.
OFFSETS = [0.125, -0.125, 0.25, -0.25, 0.0625, -0.0625, 0.125, -0.125]


# --- building blocks ---------------------------------------------------------------------------


def test_run_metrics_reads_a_summary_and_codes_the_cliff():
    assert run_metrics(make_run(0, 0.75, 0.5, "cliff")["summary"]) == {
        "peak": 0.75,
        "final": 0.5,
        "gain": 0.5,
        "final_gain": 0.25,
        "cliff": 1.0,
    }
    assert run_metrics(make_run(0, 0.75, 0.5, "provisional")["summary"])["cliff"] == 1.0
    assert run_metrics(make_run(0, 0.75, 0.5, "none")["summary"])["cliff"] == 0.0
    assert run_metrics(make_run(0, 0.75, 0.5, "insufficient")["summary"])["cliff"] is None
    assert run_metrics(None) == dict.fromkeys(("peak", "final", "gain", "final_gain", "cliff"))


def test_bootstrap_interval_of_a_known_sample():
    # Twenty values, half 0 and half 1: mean .5, bootstrap SE = .5/√20 ≈ .112, so the
    # percentile interval is about .5 ± .22 (far inside the bounds asserted).
    out = bootstrap_mean_ci([0.0, 1.0] * 10)
    assert out.n == 20 and out.mean == 0.5 and out.method == "bootstrap"
    assert out.sd == pytest.approx(math.sqrt(20 * 0.25 / 19))
    assert 0.22 < out.low < 0.34 and 0.66 < out.high < 0.78


def test_bootstrap_edge_cases():
    assert bootstrap_mean_ci([]) == Estimate(n=0, method="bootstrap")
    assert bootstrap_mean_ci([0.3, None, float("nan")]) == Estimate(
        n=1, mean=0.3, method="bootstrap"
    )
    same = bootstrap_mean_ci([0.4] * 5)
    assert same.low == pytest.approx(0.4) and same.high == pytest.approx(0.4)
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean_ci([1, 2], level=95)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_mean_ci([1, 2], n_boot=10)


def test_the_same_inputs_give_the_same_intervals():
    values = [0.1, 0.5, 0.2, 0.9, 0.4]
    assert bootstrap_mean_ci(values) == bootstrap_mean_ci(values)
    assert bootstrap_mean_ci(values, seed=1).mean == bootstrap_mean_ci(values).mean


def test_seeds_needed_matches_the_hand_calculation():
    # z.975 + z.80 = 1.959964 + 0.841621 = 2.801585.
    # d = .1, s = .2: (2.801585 × 2)² = 31.3955 → 32 pairs.
    assert seeds_needed(0.1, 0.2) == 32
    # d = −.5, s = .5: 2.801585² = 7.8489 → 8 (the sign does not matter).
    assert seeds_needed(-0.5, 0.5) == 8
    # d = .3, s = .1: (0.9339)² = 0.87 → at least 2.
    assert seeds_needed(0.3, 0.1) == 2
    # 90% power: z.90 = 1.281552; (3.241516 × 2)² = 42.03 → 43.
    assert seeds_needed(0.1, 0.2, power=0.9) == 43
    assert seeds_needed(0.0, 0.2) is None
    assert seeds_needed(0.1, None) is None
    assert seeds_needed(None, 0.2) is None


def test_decide_reads_the_interval():
    assert decide(0.01, 0.2, "shared", "per_role") == ("second_higher", "per_role higher")
    assert decide(-0.2, -0.01, "shared", "per_role") == ("first_higher", "shared higher")
    assert decide(-0.1, 0.1, "shared", "per_role")[0] == "undecided"
    assert decide(0.0, 0.1, "shared", "per_role") == (
        "undecided",
        "undecided: interval straddles 0",
    )
    assert decide(None, None, "a", "b")[0] == "insufficient"


# --- per cell ----------------------------------------------------------------------------------


def test_cell_stats_gives_one_row_per_cell_with_bootstrap_intervals():
    runs = [make_run(s, 0.5 + o, 0.25, "cliff" if s % 2 else "none") for s, o in enumerate(OFFSETS)]
    runs += [make_run(s, 0.75, 0.5, sharing="per_role") for s in range(3)]
    rows = cell_stats(runs)
    assert [r["sharing"] for r in rows] == ["shared", "per_role"]
    shared, per_role = rows
    assert shared["n_seeds"] == 8 and shared["seeds"] == list(range(8))
    assert shared["peak"]["mean"] == 0.5 and shared["peak"]["low"] < 0.5 < shared["peak"]["high"]
    assert shared["cliff"]["mean"] == 0.5  # four of eight seeds fell off a cliff
    assert per_role["peak"] == {"n": 3, "mean": 0.75, "sd": 0.0, "low": 0.75, "high": 0.75}
    assert cell_stats(runs) == rows
    json.dumps(rows, allow_nan=False)


# --- paired sharing effect ---------------------------------------------------------------------


def paired_runs(shift_peak=0.0, shift_final=0.0, per_role_status="none", workflows=("voting",)):
    runs = []
    for workflow in workflows:
        for seed, offset in enumerate(OFFSETS):
            base = 0.5 + offset / 4
            runs.append(make_run(seed, base, base - 0.125, workflow=workflow, sharing="shared"))
            runs.append(
                make_run(
                    seed,
                    base + offset + shift_peak,
                    base - 0.125 - offset + shift_final,
                    per_role_status,
                    workflow=workflow,
                    sharing="per_role",
                )
            )
    return runs


def test_no_effect_gives_an_interval_around_zero_and_no_verdict():
    # per_role − shared = the offsets: mean exactly 0, spread .16.
    out = paired_effect(paired_runs())
    cell = out["cells"][0]
    assert cell["n_pairs"] == 8 and cell["seeds"] == list(range(8))
    for metric in ("peak", "final"):
        effect = cell[metric]
        assert effect["mean"] == 0.0
        assert effect["low"] < 0 < effect["high"]
        assert effect["decision"] == "undecided"
        assert effect["verdict"] == "undecided: interval straddles 0"
        assert effect["n_needed"] is None and effect["more_needed"] is None
    # No run fell off a cliff under either mode: "no cliffs", not the interval [0, 0].
    assert cell["cliff"]["mean"] == 0.0 and cell["cliff"]["low"] is None
    assert cell["cliff"]["decision"] == "no_cliffs" and cell["cliff"]["verdict"] == "no cliffs"
    assert out["overall"]["cliff"]["decision"] == "no_cliffs"
    assert out["overall"]["peak"]["decision"] == "undecided"
    assert out["unpaired"] == 0


def test_a_clear_effect_is_called_with_its_direction():
    # per_role peaks .5 higher (SE of the mean difference ≈ .06) and ends .5 lower; every
    # per_role seed falls off a cliff, no shared one does.
    out = paired_effect(paired_runs(0.5, -0.5, "cliff"))
    cell = out["cells"][0]
    assert cell["peak"]["mean"] == pytest.approx(0.5) and cell["peak"]["low"] > 0.2
    assert cell["peak"]["decision"] == "second_higher"
    assert cell["peak"]["verdict"] == "per_role higher"
    assert cell["final"]["high"] < -0.2 and cell["final"]["verdict"] == "shared higher"
    # 8 of 8 against 0 of 8: a rate's interval, not the point [1, 1] a t-interval of eight
    # equal differences makes (Newcombe: 1 − the Wilson half-widths of 8/8 and 0/8).
    low = 1 - ((1 - wilson(8, 8)[0]) ** 2 + wilson(0, 8)[1] ** 2) ** 0.5
    assert cell["cliff"] == {
        "n": 8,
        "mean": 1.0,
        "sd": 0.0,
        "low": pytest.approx(low),
        "high": 1.0,
        "method": "newcombe",
        "decision": "second_higher",
        "verdict": "per_role higher",
        "n_needed": 4,  # McNemar's test: ⌈1.96²⌉ pairs when every pair is discordant one way
        "more_needed": 0,
    }
    # The paired SD is the SD of the offsets; seeds_needed uses it, floored at 3 seeds.
    sd = cell["peak"]["sd"]
    assert cell["peak"]["n_needed"] == max(3, seeds_needed(cell["peak"]["mean"], sd))


def test_pairs_follow_the_other_axes_and_the_seed():
    runs = paired_runs(0.5, workflows=("voting", "eval_opt"))
    runs.append(make_run(99, 0.5, 0.5, workflow="voting", sharing="shared"))  # no partner
    runs.append(make_run(0, 0.5, 0.5, workflow="voting", sharing="per_agent"))  # other level
    out = paired_effect(runs)
    assert [c["workflow"] for c in out["cells"]] == ["voting", "eval_opt"]
    assert "sharing" not in out["cells"][0]
    assert out["overall"]["peak"]["n"] == 16 and out["unpaired"] == 1
    assert out["overall"]["peak"]["verdict"] == "per_role higher"
    assert out == paired_effect(runs)  # same inputs, same numbers
    json.dumps(out, allow_nan=False)


def test_another_axis_can_be_the_factor():
    runs = [make_run(s, 0.5, 0.25, model="tiny-s") for s in range(4)]
    runs += [make_run(s, 0.25, 0.25, model="tiny-m") for s in range(4)]
    out = paired_effect(runs, factor="model", first="tiny-m", second="tiny-s", metrics=("peak",))
    assert out["overall"]["peak"]["mean"] == 0.25
    assert out["overall"]["peak"]["verdict"] == "tiny-s higher"


def test_an_insufficient_run_leaves_only_the_cliff_rate():
    runs = paired_runs()
    runs[1]["summary"]["accuracy"]["cliff_status"] = "insufficient"
    cell = paired_effect(runs)["cells"][0]
    assert cell["peak"]["n"] == 8 and cell["cliff"]["n"] == 7


def test_paired_effect_names_bad_input():
    with pytest.raises(ValueError, match="two runs with sharing=shared at .*seed=0"):
        paired_effect([make_run(0, 0.5, 0.5), make_run(0, 0.6, 0.5)])
    with pytest.raises(ValueError, match="factor 'lr'"):
        paired_effect([], factor="lr")
    assert paired_effect([])["overall"]["peak"]["decision"] == "insufficient"


# --- main effects ------------------------------------------------------------------------------


def test_main_effects_are_level_means_against_the_grand_mean():
    runs = []
    for seed, offset in enumerate(OFFSETS):
        for model in ("tiny-s", "tiny-m"):  # identical values: no model effect
            runs.append(make_run(seed, 0.75 + offset / 4, 0.5, workflow="voting", model=model))
            runs.append(make_run(seed, 0.25 + offset / 4, 0.5, workflow="single", model=model))
    out = main_effects(runs)
    assert set(out) == {"workflow", "model"}  # task and sharing have one level each
    voting, single = out["workflow"]["peak"]
    assert voting["level"] == "voting" and voting["n"] == 16
    assert voting["mean"] == 0.75 and voting["effect"] == 0.25 and single["effect"] == -0.25
    assert voting["low"] > 0.15 and single["high"] < -0.15
    assert (
        voting["decision"] == "above"
        and voting["verdict"] == "voting above the average of workflow"
    )
    assert single["decision"] == "below"
    for row in out["model"]["peak"]:
        assert row["effect"] == 0.0 and row["low"] < 0 < row["high"]
        assert row["decision"] == "undecided"
    assert out == main_effects(runs)
    json.dumps(out, allow_nan=False)


def test_the_grand_mean_weighs_levels_equally():
    runs = [make_run(s, 0.75, 0.5, workflow="voting") for s in range(6)]
    runs += [make_run(s, 0.25, 0.5, workflow="single") for s in range(2)]
    voting, single = main_effects(runs, metrics=("peak",))["workflow"]["peak"]
    assert voting["effect"] == 0.25 and single["effect"] == -0.25  # grand mean .5, not .625


# --- the reviewer's test -----------------------------------------------------------------------


def test_amplification_before_every_cliff_is_more_than_chance():
    # Twelve runs logged at steps 0…99, cliff at 50, onset at 10: lead 40 everywhere. A random
    # onset lands before step 50 with probability .5, so P(all twelve) = .5¹² = .000244; its
    # mean lead is 50 − 49.5 = .5 against the observed 40 (null SD of the mean ≈ 8.3).
    runs = [{"cliff_onset": 50, "onset": 10, "steps": list(range(100))} for _ in range(12)]
    out = lead_test(runs)
    assert out["n"] == 12 and out["n_precede"] == 12 and out["fraction"] == 1.0
    assert out["null_fraction"] == 0.5 and out["null_mean_lead"] == 0.5
    assert out["p_fraction_exact"] == pytest.approx(0.5**12)
    assert out["p_fraction"] < 0.01 and out["p_mean_lead"] < 0.01
    assert out["decision"] == "precedes"
    assert out["verdict"].startswith("amplification preceded the cliff in 12 of 12 runs")
    assert out["verdict"].endswith("more often than chance")
    assert out["leads"] == [40] * 12 and out["lead_median"] == 40
    assert out["n_perm"] == 10_000
    assert lead_test(runs) == out
    json.dumps(out, allow_nan=False)


def test_onsets_spread_like_chance_are_not_significant():
    # Onsets at 5, 15, …, 95 twice over: half before the cliff at 50, as chance would have it.
    runs = [
        {"cliff_onset": 50, "onset": onset, "steps": list(range(100))}
        for onset in list(range(5, 100, 10)) * 2
    ]
    out = lead_test(runs)
    assert out["fraction"] == 0.5 and out["mean_lead"] == 0.0
    # P(K ≥ 10) for K ~ Binomial(20, .5) = .588.
    assert out["p_fraction_exact"] == pytest.approx(0.5881, abs=1e-4)
    assert out["p_fraction"] == pytest.approx(out["p_fraction_exact"], abs=0.03)
    assert out["p_mean_lead"] > 0.2
    assert out["decision"] == "not_shown"
    assert out["verdict"].endswith("not distinguishable from chance")


def test_exact_p_value_by_hand_and_lead_quartiles():
    # Run 1: cliff at 5 of steps 0…9 (a random onset precedes it with probability .5);
    # run 2: cliff at 8 (probability .8). Both observed leads are positive, so
    # p = P(both) = .5 × .8 = .4.
    two = [
        {"cliff_onset": 5, "onset": 0, "steps": list(range(10))},
        {"cliff_onset": 8, "onset": 3, "steps": list(range(10))},
    ]
    out = lead_test(two)
    assert out["p_fraction_exact"] == pytest.approx(0.4)
    assert out["null_fraction"] == pytest.approx(0.65)
    leads = [
        {"cliff_onset": 100, "onset": 100 - lead, "steps": list(range(200))}
        for lead in (50, 10, 30, 0, 20, -10)
    ]
    out = lead_test(leads)
    assert out["leads"] == [-10, 0, 10, 20, 30, 50]
    assert out["n_precede"] == 4 and out["n_same"] == 1
    # numpy's linear quantiles of six values: q1 at position 1.25, median 2.5, q3 3.75.
    assert out["lead_q1"] == 2.5 and out["lead_median"] == 15.0 and out["lead_q3"] == 27.5
    assert out["lead_min"] == -10 and out["lead_max"] == 50


def test_runs_without_a_cliff_or_an_onset_are_left_out():
    runs = [
        {"cliff_onset": None, "onset": 10, "steps": [0, 10]},
        {"cliff_onset": 50, "onset": None, "steps": [0, 10]},
        {"cliff_onset": 50, "onset": 10, "steps": []},
    ]
    out = lead_test(runs)
    assert out["n"] == 0 and out["decision"] == "insufficient" and out["p_fraction"] is None
    with pytest.raises(ValueError, match="n_perm"):
        lead_test(runs, n_perm=5)


def test_lead_inputs_take_the_earliest_amplifying_role():
    steps = list(range(0, 100, 10))
    accuracy = [0.2, 0.4, 0.6, 0.7, 0.7, 0.7, 0.2, 0.2, 0.2, 0.2]  # cliff from 60
    flat = [1.0] * 100
    rising = [1.0] * 30 + [5.0] * 70  # onset 30
    later = [1.0] * 50 + [5.0] * 50  # onset 50
    series = {
        "eval/accuracy": (steps, accuracy),
        "role/gen/grad_norm": (list(range(100)), later),
        "role/agg/grad_norm": (list(range(100)), rising),
        "role/judge/grad_norm": (list(range(100)), flat),
    }
    summary = summarize_run(series)
    assert summary["accuracy"]["cliff_onset"] == 60
    entry = lead_inputs(series, summary)
    assert entry["role"] == "agg" and entry["onset"] == 30 and entry["cliff_onset"] == 60
    assert entry["steps"] == list(range(100))
    assert lead_inputs(series, summary, role="gen")["onset"] == 50
    assert lead_inputs(series, summary, role="judge")["onset"] is None
    assert lead_test([entry] * 3)["leads"] == [30, 30, 30]


def test_seeds_are_listed_in_numeric_order():
    runs = [make_run(s, 0.5, 0.5) for s in (10, 2, 1)]
    runs += [make_run(s, 0.5, 0.5, sharing="per_role") for s in (10, 2, 1)]
    assert cell_stats(runs)[0]["seeds"] == [1, 2, 10]
    assert paired_effect(runs)["cells"][0]["seeds"] == [1, 2, 10]


def test_the_seed_and_radar_modules_import_nothing_heavy():
    # The web process imports them (docs/design.md §2): no torch, no Django, and of scipy
    # only `scipy.special` (a quarter second); `scipy.stats` (most of a second) waits for
    # the first interval of a rate.
    probe = (
        "import json, sys; import analysis.radar, analysis.stats, analysis.bands; "
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'scipy.stats', 'django') "
        "if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == []
