"""The seed-bands figure and the sortable run table, from hand-built runs whose statistics are
worked out in the comments (no database: the builders take configs, series and summaries)."""

import math
from types import SimpleNamespace

import pytest

from webapp.dashboards import run_table, seed_bands

T_975_2 = 4.302652729911275  # Student-t 97.5% quantile, 2 degrees of freedom
STEPS = [0, 10, 20]


def run(config, values, steps=STEPS):
    return {"config": config, "series": (steps, values)}


# Group "shared": seeds at 1,2,3 / 3,4,5 / 2,3,4 → mean 2,3,4, sd 1, n 3, so the 95% interval
# of the mean is ± t(0.975, 2)·1/√3 = ± 2.4841; min 1,2,3, max 3,4,5.
# Group "per_role": three seeds at 10 → mean 10, sd 0: an interval of width 0.
RUNS = [
    run({"sharing": "shared", "seed": 0, "lr": 1e-5}, [1, 2, 3]),
    run({"sharing": "shared", "seed": 1, "lr": 1e-5}, [3, 4, 5]),
    run({"sharing": "shared", "seed": 2, "lr": 1e-5}, [2, 3, 4]),
    run({"sharing": "per_role", "seed": 0, "lr": 1e-5}, [10, 10, 10]),
    run({"sharing": "per_role", "seed": 1, "lr": 1e-5}, [10, 10, 10]),
    run({"sharing": "per_role", "seed": 2, "lr": 1e-5}, [10, 10, 10]),
]
HALF = T_975_2 / math.sqrt(3)


def test_runs_grouped_by_a_config_field_give_mean_interval_and_range():
    groups = seed_bands.bands(RUNS, "sharing")
    assert [(g["value"], g["runs"]) for g in groups] == [("per_role", 3), ("shared", 3)]
    shared = groups[1]["band"]
    assert shared["steps"] == STEPS and shared["n"] == [3, 3, 3]
    assert shared["mean"] == pytest.approx([2, 3, 4])
    assert shared["low"] == pytest.approx([2 - HALF, 3 - HALF, 4 - HALF])
    assert shared["high"] == pytest.approx([2 + HALF, 3 + HALF, 4 + HALF])
    assert (shared["min"], shared["max"]) == ([1, 2, 3], [3, 4, 5])
    assert groups[0]["band"]["low"] == groups[0]["band"]["high"] == [10, 10, 10]


def test_no_grouping_puts_every_run_in_one_band():
    (group,) = seed_bands.bands(RUNS, seed_bands.NO_GROUP)
    assert group["runs"] == 6
    assert group["band"]["mean"] == pytest.approx([6, 6.5, 7])  # (2+10)/2, (3+10)/2, (4+10)/2


def test_smoothing_choices_reach_the_statistics():
    one = [run({"sharing": "shared"}, [1, 2, 3])]
    # A trailing window of 2: 1, (1+2)/2, (2+3)/2.
    assert seed_bands.bands(one, "sharing", "win-2")[0]["band"]["mean"] == [1, 1.5, 2.5]
    # EMA α 0.5: 1, 0.5·2 + 0.5·1 = 1.5, 0.5·3 + 0.5·1.5 = 2.25.
    assert seed_bands.bands(one, "sharing", "ema-0.5")[0]["band"]["mean"] == [1, 1.5, 2.25]
    assert seed_bands.smoothing_options("0") == {"smoothing": None}
    assert set(seed_bands.SMOOTHING) >= {"0", "ema-0.1", "win-5"}


def test_a_list_or_dict_valued_field_groups_by_its_json_text():
    runs = [
        run({"kl_beta_per_role": {"generator": 0.1}}, [1, 1, 1]),
        run({"kl_beta_per_role": {"generator": 0.1}}, [3, 3, 3]),
        run({"kl_beta_per_role": {}}, [5, 5, 5]),
    ]
    groups = seed_bands.bands(runs, "kl_beta_per_role")
    assert [(g["value"], g["runs"]) for g in groups] == [('{"generator": 0.1}', 2), ("{}", 1)]
    assert groups[0]["band"]["mean"] == [2, 2, 2]


def test_config_fields_lists_every_field_and_those_that_differ():
    fields, varying = seed_bands.config_fields([r["config"] for r in RUNS])
    assert fields == ["lr", "seed", "sharing"]
    assert varying == ["seed", "sharing"]


def _fills(fig):
    return [t for t in fig.data if t.fill == "toself"]


def test_the_figure_draws_one_band_and_one_mean_line_per_group():
    fig = seed_bands.bands_figure(seed_bands.bands(RUNS, "sharing"), "train/reward", "sharing")
    bands = _fills(fig)
    means = [t for t in fig.data if t.fill != "toself"]
    assert len(bands) == 2 and len(means) == 2
    assert [t.name for t in means] == ["sharing = per_role (3 runs)", "sharing = shared (3 runs)"]
    # The shared band is one polygon: the upper edge left to right, the lower edge back.
    shared = bands[1]
    assert list(shared.x) == [0, 10, 20, 20, 10, 0]
    assert list(shared.y) == pytest.approx(
        [2 + HALF, 3 + HALF, 4 + HALF, 4 - HALF, 3 - HALF, 2 - HALF]
    )
    assert list(means[1].y) == pytest.approx([2, 3, 4])
    assert means[0].line.color == "#d9731a"  # per_role keeps its colour across the panel
    assert fig.layout.yaxis.type == "linear"


def test_the_figure_draws_min_max_no_band_and_log_scale_on_request():
    groups = seed_bands.bands(RUNS, "sharing")
    minmax = seed_bands.bands_figure(groups, "train/reward", "sharing", band="minmax")
    assert list(_fills(minmax)[1].y) == [3, 4, 5, 3, 2, 1]
    assert _fills(seed_bands.bands_figure(groups, "train/reward", "sharing", band="none")) == []
    log = seed_bands.bands_figure(groups, "train/reward", "sharing", scale="log")
    assert log.layout.yaxis.type == "log"


def test_a_step_only_one_run_logged_has_a_mean_but_no_interval():
    runs = [run({"s": "a"}, [1, 2], [0, 10]), run({"s": "a"}, [3, 4, 9], [0, 10, 20])]
    fig = seed_bands.bands_figure(seed_bands.bands(runs, "s"), "k", "s")
    (band,) = _fills(fig)
    assert list(band.x) == [0, 10, 10, 0]  # step 20 has n = 1: no interval there
    mean = [t for t in fig.data if t.fill != "toself"][0]
    assert list(mean.x) == [0, 10, 20] and list(mean.y) == [2, 3, 9]


def test_user_text_in_the_figure_is_escaped():
    runs = [run({"note": "<b>bold</b> %{x}"}, [1, 2, 3])]
    fig = seed_bands.bands_figure(seed_bands.bands(runs, "note"), "<i>k</i>", "note")
    mean = [t for t in fig.data if t.fill != "toself"][0]
    assert "<b>" not in mean.name and "&lt;b&gt;bold&lt;/b&gt;" in mean.name
    assert "%{x}" not in mean.name and "%{x}" not in mean.hovertemplate.split("<br>")[0]
    assert "<i>" not in fig.layout.yaxis.title.text


def test_no_points_says_so():
    fig = seed_bands.bands_figure([], "eval/accuracy", "sharing")
    assert fig.data == () and "No eval/accuracy points" in fig.layout.annotations[0].text


# --- the run table ------------------------------------------------------------------------------


def _runs_and_rows():
    runs = [SimpleNamespace(id=i, status="succeeded") for i in (1, 2, 3, 4)]
    configs = {
        1: {"sharing": "shared", "seed": 0, "lr": 1e-5, "note": "x"},
        2: {"sharing": "per_role", "seed": 0, "lr": 1e-5, "note": "x"},
        3: {"sharing": "shared", "seed": 1, "lr": 1e-4, "note": "x"},
        4: {"sharing": "per_role", "seed": 1, "lr": 1e-4, "note": "x", "tags": [1, 2]},
    }
    accuracy = {
        1: {"peak": 0.9, "peak_step": 40, "final": 0.5, "cliff_status": "cliff", "cliff_onset": 60},
        2: {"peak": 0.35, "peak_step": 90, "final": 0.35, "cliff_status": "none"},
        3: {"peak": 0.1, "peak_step": 10, "final": 0.1, "cliff_status": "none"},
        4: {},  # no evaluations yet
    }
    summaries = {i: {"accuracy": a} for i, a in accuracy.items()}
    return runs, configs, run_table.rows(runs, configs, summaries)


def test_rows_hold_config_fields_and_accuracy_results():
    _runs, _configs, rows = _runs_and_rows()
    assert rows[0]["config.sharing"] == "shared" and rows[0]["config.lr"] == 1e-5
    assert rows[0]["peak"] == 0.9 and rows[0]["final"] == 0.5
    assert rows[0]["cliff"] == "cliff @60" and rows[0]["cliff_onset"] == rows[0]["onset"] == 60
    assert rows[3]["peak"] is None and rows[3]["cliff"] == "no evaluations"
    assert rows[3]["config.tags"] == "[1, 2]"


def test_columns_show_the_core_and_differing_fields_group_by_first():
    _runs, configs, _rows = _runs_and_rows()
    _fields, varying = seed_bands.config_fields(list(configs.values()))
    fields = run_table.shown_fields(list(configs.values()), varying)
    assert fields == ["sharing", "seed", "lr", "tags"]  # "note" is the same everywhere
    ids = [c.id for c in run_table.columns(fields, group_by="lr")]
    assert ids[:4] == ["run", "config.lr", "config.sharing", "config.seed"]
    assert ids[-6:] == ["status", "peak", "peak_step", "final", "cliff", "onset"]


def test_sorting_is_numeric_and_puts_empty_cells_last_both_ways():
    _runs, _configs, rows = _runs_and_rows()
    by = lambda col, desc=False: [r["run"] for r in run_table.sort_rows(rows, col, desc)]  # noqa: E731
    assert by("peak") == [3, 2, 1, 4]
    assert by("peak", desc=True) == [1, 2, 3, 4]  # the run with no peak stays last
    assert by("config.lr") == [1, 2, 3, 4]  # ties keep run order
    assert by("config.lr", desc=True) == [3, 4, 1, 2]
    assert by("cliff") == [1, 4, 2, 3]  # words: cliff @60, no evaluations, none, none
    assert by(None) == [1, 2, 3, 4]


def test_sorting_numbers_is_not_sorting_their_text():
    rows = [{"run": 1, "x": 10}, {"run": 2, "x": 9}, {"run": 3, "x": 100}]
    assert [r["x"] for r in run_table.sort_rows(rows, "x")] == [9, 10, 100]


def test_accuracy_bands_are_clipped_to_what_an_accuracy_can_be():
    bounds = seed_bands.value_bounds
    assert bounds("eval/accuracy") == (0.0, 1.0) == bounds("eval/accuracy/generator")
    assert bounds("eval/accuracy_se") is None and bounds("train/loss") is None
    runs = [{"config": {}, "series": ([0], [v])} for v in (0.0, 0.03, 0.0)]
    (group,) = seed_bands.bands(runs, seed_bands.NO_GROUP, key="eval/accuracy")
    assert group["band"]["low"] == [0.0]
