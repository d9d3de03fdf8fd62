"""The panel's callbacks, called as plain functions on a real database holding the demo
experiment (webapp/demo/build.py): each returns the traces, rows and state its view
needs — including the known cliff of `cliff_run` and the known capture of `capture_run`."""

import uuid
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from webapp.dashboards import components, data, figures, labels, state, tables
from webapp.dashboards.pages import compare, gradients, home, matrix
from webapp.demo.build import LEAD, build_demo_experiment
from webapp.experiments.models import Run
from webapp.runs.summaries import clear_cache

pytestmark = pytest.mark.django_db

STEPS = 120  # evaluations every 10 steps: 13 of them, the cliff at 70


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """The full demo matrix (72 runs), built once for this module and deleted after it."""
    with django_db_blocker.unblock():
        owner = get_user_model().objects.create_user(f"owner-{uuid.uuid4().hex[:8]}")
        built = build_demo_experiment(owner, steps=STEPS)
    clear_cache()
    yield built
    with django_db_blocker.unblock():
        built.experiment.delete()
        owner.delete()
    clear_cache()


@pytest.fixture
def viewer(demo, bob):
    """bob, a teammate (not the owner): anyone signed in may read every experiment."""
    with data.viewing_as(bob):
        yield bob


def traces(figure, **match):
    return [t for t in figure.data if all(getattr(t, k) == v for k, v in match.items())]


def read_table(table, columns) -> list[dict[str, str]]:
    """The rendered table as {column id: cell text} rows (a link cell: its text)."""
    if table.__class__.__name__ != "Table":
        return []
    body = table.children[1].children
    texts = [
        [
            td.children if isinstance(td.children, str) else td.children.children
            for td in tr.children
        ]
        for tr in body
    ]
    return [dict(zip([c.id for c in columns], row, strict=True)) for row in texts]


# --- matrix ---------------------------------------------------------------------------------------


def test_the_matrix_draws_one_grid_per_sharing_mode_coloured_by_gain(demo, viewer):
    figure, table, status, timer_off = matrix.update_matrix(demo.experiment.id, "gain", 0)
    rows = read_table(table, tables.CELL_COLUMNS)

    heatmaps = traces(figure, type="heatmap")
    assert len(heatmaps) == 2  # shared, per_role
    assert [a.text for a in figure.layout.annotations][:2] == [
        "Shared policy",
        "Isolated: one policy per role",
    ]
    assert list(heatmaps[0].x) == ["tiny-s", "tiny-m"]
    assert list(heatmaps[0].y) == [
        "Voting · math",
        "Voting · code",
        "Eval-Opt · math",
        "Eval-Opt · code",
        "Orch-Workers · math",
        "Orch-Workers · code",
    ]
    assert len(rows) == 24 and all(r["n_seeds"] == "3" for r in rows)
    # The cell of the known cliff run: isolated voting · math · tiny-s, first row and column.
    cell = next(
        r
        for r in rows
        if (r["workflow"], r["task"], r["model"], r["sharing"])
        == ("voting", "math", "tiny-s", "per_role")
    )
    isolated = heatmaps[1]
    assert f"{isolated.z[0][0]:+.3f}" == cell["gain_mean"]  # the figure and the table agree
    assert str(demo.cliff_run.id) in isolated.customdata[0][0].split(",")
    base, peak, final = (cell[k] for k in ("base_mean", "peak_mean", "final_mean"))
    assert f"{float(base):.2f} → {float(peak):.2f} → {float(final):.2f}" in isolated.text[0][0]
    n_cliffs = int(cell["cliffs"].split("/")[0])
    assert n_cliffs >= 1 and f"cliffs {n_cliffs}/3" in isolated.text[0][0]
    assert cell["compare"] == "compare 3 →"
    assert timer_off is True  # every run finished: no refreshing
    assert "72 runs" in str(status)


def test_the_switch_colours_cells_by_final_gain(demo, viewer):
    by_gain = matrix.update_matrix(demo.experiment.id, "gain", 0)[0]
    by_final, table, _, _ = matrix.update_matrix(demo.experiment.id, "final_gain", 0)
    first = read_table(table, tables.CELL_COLUMNS)[0]  # voting · math · tiny-s · shared
    assert f"{by_final.data[0].z[0][0]:+.3f}" == first["final_gain_mean"]
    assert f"{by_gain.data[0].z[0][0]:+.3f}" == first["gain_mean"]
    assert "final gain" in by_final.layout.coloraxis.colorbar.title.text


def test_clicking_a_cell_opens_its_runs_in_the_compare_view(demo, viewer):
    figure = matrix.update_matrix(demo.experiment.id, "gain", 0)[0]
    run_ids = figure.data[1].customdata[0][0]
    click = {"points": [{"curveNumber": 1, "customdata": run_ids}]}

    assert matrix.open_cell(click) == f"/dash/compare?runs={run_ids}&key=eval/accuracy"


def test_the_cells_table_downloads_as_csv(demo, viewer):
    download = matrix.download_cells(1, demo.experiment.id)

    lines = download["content"].splitlines()
    assert download["filename"].endswith(".csv")
    assert lines[0].startswith("workflow,task,model,sharing,n_seeds,seeds,base_mean")
    assert len(lines) == 1 + 24


def test_the_matrix_lists_experiments_and_mirrors_its_state_in_the_url(demo, viewer):
    options = components.experiment_options("/dash/matrix")
    assert demo.experiment.id in [o["value"] for o in options]
    assert matrix.sync_url(demo.experiment.id, "gain") == f"?experiment={demo.experiment.id}"
    assert matrix.sync_url(5, "final_gain") == "?experiment=5&colour=final_gain"


def test_an_experiment_is_labelled_with_its_run_count():
    def experiment(n_runs):
        return SimpleNamespace(name="sweep", id=5, n_runs=n_runs)

    assert labels.experiment_label(experiment(1)) == "sweep (#5, 1 run)"
    assert labels.experiment_label(experiment(12)) == "sweep (#5, 12 runs)"


def test_an_unknown_experiment_draws_nothing(demo, viewer):
    figure, table, _, timer_off = matrix.update_matrix(999_999, "gain", 0)
    assert read_table(table, tables.CELL_COLUMNS) == [] and timer_off is True
    assert figure.layout.annotations[0].text == "No such experiment."


def test_nobody_signed_in_sees_nothing(demo):
    figure, table, _, _ = matrix.update_matrix(demo.experiment.id, "gain", 0)
    assert read_table(table, tables.CELL_COLUMNS) == [] and not traces(figure, type="heatmap")
    assert compare.run_options([demo.cliff_run.id]) == []


# --- curves ---------------------------------------------------------------------------------------


def test_curves_overlay_accuracy_with_peak_and_cliff_markers(demo, viewer):
    cell = list(
        Run.objects.filter(
            experiment=demo.experiment,
            workflow="voting",
            task="math",
            model="tiny-s",
            sharing="per_role",
        ).values_list("id", flat=True)
    )
    figure, table, _, timer_off, links = compare.update_compare(
        cell, "eval/accuracy", "0", "sharing", 0
    )
    rows = read_table(table, tables.RUN_COLUMNS)

    lines = [t for t in figure.data if t.mode == "lines+markers"]
    assert [t.name.split(" · ")[0] for t in lines] == [f"run {i}" for i in cell]
    cliff_line = next(t for t in lines if t.name.startswith(f"run {demo.cliff_run.id} "))
    assert list(cliff_line.x) == list(range(0, STEPS + 1, 10))  # every evaluation, in order
    group = str(demo.cliff_run.id)
    peak = next(t for t in figure.data if t.legendgroup == group and t.marker.symbol == "star")
    row = next(r for r in rows if r["run"] == str(demo.cliff_run.id))
    assert (str(peak.x[0]), f"{peak.y[0]:.3f}") == (row["peak_step"], row["peak"])
    cliff = next(t for t in figure.data if t.legendgroup == group and t.marker.symbol == "x-thin")
    assert cliff.x[0] == demo.cliff_onset
    assert row["onset"] == str(demo.cliff_onset)
    assert demo.cliff_onset in [shape.x0 for shape in figure.layout.shapes]
    assert row["cliff"] == f"cliff @{demo.cliff_onset}"  # the words every page uses
    assert timer_off is True
    assert state.gradients_url(cell) in str(links)


def test_curves_colour_runs_by_sharing_mode_or_by_seed(demo, viewer):
    runs = [demo.cliff_run.id, demo.capture_run.id]  # per_role and shared, both seed 0
    by_sharing = compare.update_compare(runs, "eval/accuracy", "0", "sharing", 0)[0]
    by_seed = compare.update_compare(runs, "eval/accuracy", "0", "seed", 0)[0]

    def line_colours(figure):
        return [t.line.color for t in figure.data if t.mode == "lines+markers"]

    assert len(set(line_colours(by_sharing))) == 2  # two sharing modes
    assert len(set(line_colours(by_seed))) == 1  # one seed
    assert {t.line.dash for t in by_seed.data if t.mode == "lines+markers"} == {"solid", "dash"}


def test_smoothing_draws_the_smoothed_line_over_the_faint_raw_one(demo, viewer):
    figure = compare.update_compare([demo.capture_run.id], "train/reward", "9", "sharing", 0)[0]

    raw, smooth = [t for t in figure.data if t.x is not None and t.x[0] is not None]
    assert raw.opacity == 0.3 and smooth.opacity is None
    assert len(raw.x) == len(smooth.x) == STEPS
    assert max(smooth.y) - min(smooth.y) < max(raw.y) - min(raw.y)


def test_any_logged_metric_can_be_drawn(demo, viewer):
    options = [o["value"] for o in compare.key_options([demo.cliff_run.id])]
    assert options[0] == "eval/accuracy"
    assert {"train/reward", "role/generator/grad_norm", "grad_cos/generator0|generator1"} <= set(
        options
    )

    figure = compare.update_compare([demo.cliff_run.id], "train/entropy", "0", "sharing", 0)[0]
    (line,) = [t for t in figure.data if t.mode == "lines"]
    assert len(line.x) == STEPS
    assert demo.cliff_onset in [shape.x0 for shape in figure.layout.shapes]  # still marked


def test_a_long_selection_draws_its_first_runs_and_tables_them_all(demo, viewer, monkeypatch):
    monkeypatch.setattr("webapp.dashboards.figures.MAX_CURVES", 2)
    run_ids = list(demo.experiment.runs.values_list("id", flat=True)[:3])
    figure, table, status, _, _ = compare.update_compare(run_ids, "eval/accuracy", "0", "seed", 0)

    assert len([t for t in figure.data if t.mode == "lines+markers"]) == 2
    assert len(read_table(table, tables.RUN_COLUMNS)) == 3
    assert "figure shows the first 2 runs; the table lists all 3" in str(status)


def test_long_series_are_downsampled_keeping_their_extremes(demo, viewer):
    series = data.series([demo.cliff_run.id], ["train/reward"], max_points=20)
    full = data.series([demo.cliff_run.id], ["train/reward"], max_points=0)
    points, every = (
        series[demo.cliff_run.id]["train/reward"],
        full[demo.cliff_run.id]["train/reward"],
    )
    assert len(points["steps"]) <= 20
    assert max(points["values"]) == max(every["values"])
    assert min(points["values"]) == min(every["values"])


def test_the_curves_tables_and_series_download_as_csv(demo, viewer):
    table = compare.download_table(1, [demo.cliff_run.id])["content"].splitlines()
    assert table[0].startswith("run,workflow,task,model,sharing,seed,status")
    assert table[1].startswith(f"{demo.cliff_run.id},voting,math,tiny-s,per_role,0,succeeded")

    series = compare.download_series(1, [demo.cliff_run.id], "eval/accuracy")
    lines = series["content"].splitlines()
    assert lines[0] == "run,workflow,task,model,sharing,seed,key,step,value"
    assert len(lines) == 1 + STEPS // 10 + 1
    assert series["filename"] == "troupe-eval_accuracy.csv"


def test_curves_mirror_their_controls_in_the_url(demo, viewer):
    assert compare.sync_url([3, 7], "eval/accuracy", "0", "sharing") == (
        "?runs=3,7&key=eval/accuracy"
    )
    assert (
        compare.sync_url([3], "train/kl", "5", "seed")
        == "?runs=3&key=train/kl&smooth=5&colour=seed"
    )


# --- gradients ------------------------------------------------------------------------------------


def test_gradient_dynamics_of_a_cliff_and_a_capture(demo, viewer):
    run_ids = [demo.cliff_run.id, demo.capture_run.id]
    figure, table, findings, _, timer_off, _ = gradients.update_gradients(run_ids, 0)
    rows = read_table(table, tables.DYNAMICS_COLUMNS)

    norms = [t for t in figure.data if t.xaxis == "x" and t.name in ("generator", "aggregator")]
    assert [t.name for t in norms] == ["aggregator", "generator"]
    assert figure.layout.yaxis.type == "log"
    shares = [t for t in figure.data if t.xaxis == "x5"]  # second row, second column
    assert {t.stackgroup for t in shares} == {"share2"}  # stacked: one shared policy
    cosines = [t for t in figure.data if t.xaxis == "x3"]
    assert {t.name for t in cosines} == {
        "cos generator0 · generator1",
        "cos generator0 · generator2",
        "cos generator1 · generator2",
    }
    first_row_lines = {(s.x0, s.line.dash) for s in figure.layout.shapes if s.xref == "x"}
    assert (demo.amplification_onset, "dot") in first_row_lines
    assert (demo.cliff_onset, "dash") in first_row_lines

    amplified = next(
        r for r in rows if r["run"] == str(demo.cliff_run.id) and r["role"] == demo.amplified_role
    )
    assert amplified["amplification"] == f"@{demo.amplification_onset}"
    assert amplified["lead"] == f"+{LEAD}"
    assert amplified["precedes"] == f"yes, by {LEAD} steps"
    captured = {r["role"]: r["captured"] for r in rows if r["run"] == str(demo.capture_run.id)}
    assert captured[demo.capturing_role] == "yes"
    assert set(captured.values()) == {"yes", "no"}
    assert "Amplification precedes the cliff in 1 of 1 run(s)" in str(findings)
    assert f"run {demo.capture_run.id}: {demo.capturing_role}" in str(findings)
    assert timer_off is True


def test_the_gradient_table_and_series_download_as_csv(demo, viewer):
    run_ids = [demo.cliff_run.id, demo.capture_run.id]
    table = gradients.download_table(1, run_ids)["content"].splitlines()
    assert table[0].startswith("run,workflow,task,model,sharing,seed,role,amplification_onset")
    assert any(line.startswith(f"{demo.cliff_run.id},") and ",generator," in line for line in table)

    series = gradients.download_series(1, run_ids)["content"].splitlines()
    keys = {line.split(",")[6] for line in series[1:]}
    assert "role/generator/grad_share" in keys and "grad_cos/aggregator|generator" in keys


def test_every_figure_exports_as_png_or_svg_without_plotly_cloud(demo, viewer):
    for page, name in ((matrix, "matrix"), (compare, "curves"), (gradients, "gradients")):
        config, patch = page.image_format("svg")
        assert config["toImageButtonOptions"] == {
            "format": "svg",
            "filename": f"troupe-{name}",
            "scale": 1,
        }
        assert "sendChartToCloud" in config["modeBarButtonsToRemove"]
        assert config["showSendToCloud"] is False
        assert patch.to_plotly_json()["operations"]  # the figure changes, so plotly re-reads
        assert page.image_format("png")[0]["toImageButtonOptions"]["format"] == "png"


# --- live refresh and the front page --------------------------------------------------------------


def test_views_refresh_only_while_a_run_is_unfinished(demo, viewer):
    run = demo.cliff_run
    Run.objects.filter(id=run.id).update(status=Run.RUNNING)

    assert matrix.update_matrix(demo.experiment.id, "gain", 0)[3] is False
    assert compare.update_compare([run.id], "eval/accuracy", "0", "sharing", 1)[3] is False
    assert gradients.update_gradients([run.id], 1)[4] is False
    assert compare.update_compare([demo.capture_run.id], "eval/accuracy", "0", "sharing", 1)[3]
    _, refresh_off = home.list_experiments("/dash/", 0)
    assert refresh_off is False


def test_a_running_run_gets_a_provisional_verdict(demo, viewer):
    Run.objects.filter(id=demo.cliff_run.id).update(status=Run.RUNNING)

    table = compare.update_compare([demo.cliff_run.id], "eval/accuracy", "0", "sharing", 0)[1]
    assert read_table(table, tables.RUN_COLUMNS)[0]["cliff"].startswith("provisional cliff @")


def test_the_front_page_links_each_experiment_to_its_matrix(demo, viewer):
    table, refresh_off = home.list_experiments("/dash/", 0)
    assert state.matrix_url(demo.experiment.id) in str(table)
    assert refresh_off is True


def test_runs_of_one_sharing_mode_and_seed_are_told_apart_by_colour():
    # Once four shared runs (seed 0, four workflows) were four identical lines.
    runs = [SimpleNamespace(id=i, seed=0, sharing="shared") for i in range(4)]
    runs.append(SimpleNamespace(id=4, seed=0, sharing="per_role"))
    styles = figures.run_styles(runs, "sharing")
    assert len({colour for colour, _ in styles.values()}) == 5
    assert {styles[i][1] for i in range(4)} == {"solid"} and styles[4][1] == "dash"
