"""A click on the panel's curves or gradient plots: the figures carry each line's run id, and
the clicked point becomes the episode view's URL for that step (nearest recorded), never an
error for a point off a run's line."""

import dash
import pytest

from webapp.dashboards import figures
from webapp.dashboards.episode_clicks import episodes_href
from webapp.experiments.models import Run


def click(run_id, x):
    return {"points": [{"curveNumber": 0, "x": x, "y": 0.5, "customdata": run_id}]}


def test_a_point_opens_its_steps_episodes():
    assert episodes_href(click(7, 30)) == "/runs/7/episodes/?kind=train&step=30&near=1"
    assert episodes_href(click(7, 30), "eval/accuracy") == (
        "/runs/7/episodes/?kind=eval&step=30&near=1"
    )
    assert episodes_href(click([7], 12.6)) == "/runs/7/episodes/?kind=train&step=13&near=1"


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"points": []},
        click(None, 3),
        click("7", 3),
        click(7, None),
        click(7, -2),
        click(True, 3),
        click(7, float("nan")),
    ],
)
def test_a_point_off_a_runs_line_does_nothing(data):
    assert episodes_href(data) is dash.no_update


def test_the_figures_carry_each_lines_run_id():
    run = Run(id=5, name="r", sharing="shared", seed=0)
    series = {5: {"train/reward": {"steps": [0, 10], "values": [0.1, 0.2]}}}
    curves = figures.curves_figure([run], series, {}, "train/reward")
    assert list(curves.data[0].customdata) == [5, 5]
    grads = {
        5: {
            "role/generator/grad_norm": {"steps": [0, 10], "values": [1.0, 2.0]},
            "role/generator/grad_share": {"steps": [0, 10], "values": [0.6, 0.7]},
        }
    }
    drawn = figures.gradients_figure([run], grads, {})
    # Every run's line (the empty cosine panel's placeholder draws no point: nothing to click).
    lines = [t for t in drawn.data if t.x and t.x[0] is not None and t.hoverinfo != "skip"]
    assert lines and all(list(t.customdata) == [5, 5] for t in lines)
