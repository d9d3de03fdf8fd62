"""Points with no finite value (NaN, ±inf) on the plots: they reach every
plot as gaps (None in strict JSON, even downsampled), the line breaks there and a red × with
"NaN/inf at step N" marks where — the run page's sparklines (first frame and live.json) and
the panel's compare and gradient views, called as plain functions on a real database."""

import json
import math

import pytest

from analysis.gaps import gap_marks, lone_points
from webapp.dashboards import data, figures, lineage_overlay
from webapp.dashboards.pages import compare, gradients
from webapp.experiments.models import Run
from webapp.metrics import read_series, write_points
from webapp.runs.lineage import Branching
from webapp.runs.sparkline import sparkline

pytestmark = pytest.mark.django_db

NAN, INF = math.nan, math.inf


def strict(content: bytes):
    """Parsed JSON that refuses NaN and Infinity (what a browser's JSON.parse refuses)."""
    return json.loads(content, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


@pytest.fixture
def diverging(run):
    """A running run whose reward goes NaN at step 4 and +inf at 7–8, one of whose gradient
    norms is -inf at step 5, and whose newest loss is NaN; every other point finite."""
    Run.objects.filter(id=run.id).update(status=Run.RUNNING, step=9)
    reward = [0.1, 0.2, 0.3, 0.35, NAN, 0.4, 0.45, INF, INF, 0.5]
    points = [("train/reward", s, v) for s, v in enumerate(reward)]
    points += [("eval/accuracy", s, 0.2 + 0.01 * s) for s in (0, 3, 6, 9)]
    norms = [1.0, 1.1, 1.2, 1.1, 1.0, -INF, 1.2, 1.3, 1.1, 1.0]
    points += [("role/solver/grad_norm", s, v) for s, v in enumerate(norms)]
    points += [("train/loss", 8, 0.7), ("train/loss", 9, NAN)]
    write_points(run.id, points)
    run.refresh_from_db()
    return run


def test_a_sparkline_breaks_at_each_gap_and_marks_it_once():
    spark = sparkline(
        "k", {"steps": [0, 1, 2, 3, 4, 5], "values": [1.0, 2.0, None, None, 3.0, 2.0]}
    )
    assert len(spark["segments"]) == 2
    assert [len(points.split()) for points in spark["segments"]] == [2, 2]
    (gap,) = spark["gaps"]  # one × for the stretch of two gaps
    assert gap["step"] == 2 and gap["title"] == "NaN/inf at step 2"
    # At the height of the last finite value before it (2.0 at step 1), at its own step.
    x1, y1 = map(float, spark["segments"][0].split()[1].split(","))
    x2 = x1 + (x1 - float(spark["segments"][0].split()[0].split(",")[0]))
    assert gap["d"].startswith(f"M{x2 - 3:.1f},{y1 - 3:.1f}L{x2 + 3:.1f},{y1 + 3:.1f}")
    assert (spark["last"], spark["last_gap"], spark["low"], spark["high"]) == (2.0, False, 1.0, 3.0)


def test_a_series_that_starts_or_ends_in_a_gap_is_marked_there():
    spark = sparkline("k", {"steps": [0, 1, 2, 3], "values": [None, 1.0, 2.0, None]})
    assert [g["step"] for g in spark["gaps"]] == [0, 3]
    assert spark["last"] == 2.0 and spark["last_gap"] is True
    # The x axis spans the gaps too: the last × sits at the right edge.
    assert spark["gaps"][1]["d"].startswith("M234.0,")
    only_gaps = sparkline("k", {"steps": [0, 1], "values": [None, None]})
    assert only_gaps["segments"] == [] and [g["step"] for g in only_gaps["gaps"]] == [0]
    assert sparkline("k", None)["segments"] == [] and sparkline("k", None)["gaps"] == []


def test_the_run_page_draws_the_gaps_and_live_json_carries_them(client, diverging, bob):
    client.force_login(bob)
    html = client.get(f"/runs/{diverging.id}/").content.decode()
    reward = html[html.index('data-spark="train/reward"') :]
    reward = reward[: reward.index("</figure>")]
    assert reward.count("<polyline") == 3  # 0–3, 5–6, 9
    assert "<title>NaN/inf at step 4</title>" in reward
    assert "<title>NaN/inf at step 7</title>" in reward
    assert "NaN/inf at step 8" not in reward  # one × for the stretch 7–8
    # The latest value of a key whose newest point is a gap says so, instead of a dash.
    latest = html[html.index("data-latest>") :]
    assert (
        '<code>train/loss</code><span class="muted small">@9</span><span class="num">NaN/inf'
        in latest
    )
    assert (
        '<code>train/reward</code><span class="muted small">@9</span><span class="num">0.5000<'
        in latest
    )

    live = strict(client.get(f"/runs/{diverging.id}/live.json").content)
    sparks = {s["key"]: s for s in live["sparklines"]}
    assert [g["step"] for g in sparks["train/reward"]["gaps"]] == [4, 7]
    assert sparks["train/reward"]["values"][4] is None
    assert sparks["eval/accuracy"]["gaps"] == []


def test_the_metrics_api_serves_gaps_as_null_whole_and_downsampled(client, diverging, bob):
    client.force_login(bob)
    # Every point; one bucket keeping its first gap; two buckets (1–4, 5–8), each its first.
    for max_points, expected in ((0, {4, 7, 8}), (5, {4}), (8, {4, 7})):
        body = strict(
            client.get(
                f"/api/v1/runs/{diverging.id}/metrics",
                {"keys": "train/reward", "max_points": max_points},
            ).content
        )
        reward = body["series"]["train/reward"]
        assert len(reward["steps"]) <= (max_points or 10)
        gaps = {s for s, v in zip(reward["steps"], reward["values"], strict=True) if v is None}
        assert gaps == expected, max_points
    assert read_series(diverging.id, ["train/reward"])["train/reward"]["values"][7] is None


def test_the_compare_view_marks_each_gap_with_a_red_cross(diverging, bob):
    with data.viewing_as(bob):
        figure = compare.update_compare([diverging.id], "train/reward", "0", "sharing", 0)[0]
    line = next(t for t in figure.data if t.name and t.name.startswith(f"run {diverging.id}"))
    assert list(line.y)[4] is None and list(line.y)[7] is None  # plotly breaks the line there
    # Step 9 lies between a gap and the end: no line to draw, so a dot in the line's colour.
    assert line.mode == "lines+markers" and list(line.marker.size) == [0] * 9 + [5]
    (marks,) = [t for t in figure.data if t.mode == "markers" and t.text]
    assert list(marks.x) == [4, 7] and list(marks.y) == [0.35, 0.45]
    assert list(marks.text) == ["NaN/inf at step 4", "NaN/inf at step 7"]
    assert marks.marker.color == figures.CLIFF and marks.legendgroup == str(diverging.id)
    assert "NaN/inf: the line breaks" in [t.name for t in figure.data]
    # Smoothing never averages a gap away: the smoothed line keeps it, the × stays.
    with data.viewing_as(bob):
        smooth = compare.update_compare([diverging.id], "train/reward", "3", "sharing", 0)[0]
    drawn = next(t for t in smooth.data if t.name and t.name.startswith(f"run {diverging.id}"))
    assert list(drawn.y)[4] is None
    assert [list(t.x) for t in smooth.data if t.mode == "markers" and t.text] == [[4, 7]]


def test_the_gradient_view_marks_a_non_finite_norm(diverging, bob):
    with data.viewing_as(bob):
        figure = gradients.update_gradients([diverging.id], 0)[0]
    (marks,) = [t for t in figure.data if t.mode == "markers" and t.text]
    assert list(marks.x) == [5] and list(marks.y) == [1.0]
    assert list(marks.text) == ["NaN/inf at step 5"]


def test_a_lone_point_between_gaps_is_drawn_as_a_dot():
    spark = sparkline("k", {"steps": [0, 1, 2], "values": [None, 0.5, None]})
    (segment,) = spark["segments"]
    first, second = segment.split()
    assert first == second  # a zero-length line, which round caps draw as a dot
    assert lone_points([1.0, None, 2.0, 3.0, None, 4.0]) == [True, False, False, False, False, True]
    assert figures.lone_dots([1.0, 2.0]) == {}
    assert figures.lone_dots([None, 1.0, None], 4)["marker"] == {"size": [0, 4, 0]}


def test_a_branch_recoloured_by_the_lineage_overlay_keeps_its_red_crosses():
    figure = figures.curves_figure(
        [Run(id=3, name="branch", sharing="shared", seed=0)],
        {3: {"train/reward": {"steps": [0, 1, 2], "values": [0.1, None, 0.2]}}},
        {},
        "train/reward",
    )
    lineage_overlay.mark(figure, {3: Branching(parent_id=1, step=0, change="lr", control=False)})
    line = next(t for t in figure.data if t.name == "run 3 · branch")
    assert line.line.color == lineage_overlay.CHANGE_COLOURS[0]
    (cross,) = [t for t in figure.data if t.meta == figures.GAPS_META]
    assert cross.marker.color == figures.CLIFF


def test_a_series_without_gaps_draws_no_cross():
    figure = figures.curves_figure(
        [Run(id=3, name="plain", sharing="shared", seed=0)],
        {3: {"train/reward": {"steps": [0, 1], "values": [0.1, 0.2]}}},
        {},
        "train/reward",
    )
    assert not [t for t in figure.data if t.mode == "markers"]
    assert gap_marks([0, 1, 2], [None, None, None]) == [(0, None)]
