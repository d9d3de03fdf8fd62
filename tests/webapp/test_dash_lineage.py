"""The compare view's lineage overlay (webapp/dashboards/lineage_overlay.py): which runs
`?run=<id>&lineage=1` selects, branches drawn from their branch step and named by their
change, and a dashed line at each branch step."""

import plotly.graph_objects as go
import pytest

from trainer.config import make_config
from webapp.dashboards import data, lineage_overlay
from webapp.dashboards.pages import compare
from webapp.experiments.models import Run
from webapp.metrics import write_points
from webapp.runs.queueing import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def family(run):
    """run (lr 0.003) with a control and an lr cut branched at step 4."""
    children = []
    for intervention in ({"lr": 0.0003}, {}):
        child = new_run(run.experiment, make_config("cpu-demo", **intervention))
        child.parent, child.branch_step, child.intervention = run, 4, intervention
        child.save()
        children.append(child)
    return run, *children


def test_the_lineage_url_selects_the_parent_and_its_branches_control_first(family):
    parent, cut, control = family

    assert lineage_overlay.lineage_ids(str(parent.id), "1") == [parent.id, control.id, cut.id]
    assert lineage_overlay.lineage_ids([str(cut.id)], ["1"]) == [parent.id, control.id, cut.id]
    assert lineage_overlay.lineage_ids(str(parent.id), None) is None
    assert lineage_overlay.lineage_ids("x", "1") is None
    assert lineage_overlay.lineage_ids("424242", "1") is None


def test_branches_start_at_their_branch_step_and_are_named_by_their_change(family):
    parent, cut, control = family
    runs = list(Run.objects.filter(id__in=[parent.id, cut.id, control.id]).defer("config"))
    curve = {"steps": [0, 2, 4, 6], "values": [0.2, 0.1, 0.3, 0.4]}
    series = {run.id: {"eval/accuracy": dict(curve)} for run in runs}

    found = lineage_overlay.apply(runs, series)

    assert set(found) == {cut.id, control.id}
    assert series[parent.id]["eval/accuracy"] == curve
    assert series[cut.id]["eval/accuracy"] == {"steps": [4, 6], "values": [0.3, 0.4]}
    names = {run.id: run.name for run in runs}
    assert names[cut.id] == f"lr 0.003 → 0.0003 (from run {parent.id} @4)"
    assert names[control.id] == f"control (no change) (from run {parent.id} @4)"
    assert names[parent.id] == ""


def test_a_branch_without_its_parent_selected_is_drawn_as_any_run(family):
    _, cut, _ = family
    series = {cut.id: {"eval/accuracy": {"steps": [0, 4], "values": [0.1, 0.2]}}}

    assert lineage_overlay.apply([cut], series) == {}
    assert series[cut.id]["eval/accuracy"]["steps"] == [0, 4]


def test_each_branch_step_gets_one_dashed_line(family):
    parent, cut, control = family
    found = lineage_overlay.apply([parent, cut, control], {})

    figure = lineage_overlay.mark(go.Figure(), found)

    (line,) = figure.layout.shapes
    assert line.x0 == 4 and line.line.dash == "dash"
    assert figure.layout.annotations[0].text == f"branch of run {parent.id} @4"


def test_the_compare_page_draws_a_family_from_the_lineage_url(family, bob):
    parent, cut, control = family
    write_points(parent.id, [("eval/accuracy", s, 0.2) for s in (0, 2, 4, 6)])
    for child in (cut, control):
        write_points(child.id, [("eval/accuracy", s, 0.3) for s in (4, 5, 6)])

    with data.viewing_as(bob):
        page = compare.layout(run=str(cut.id), lineage="1")
        figure, *_ = compare.update_compare(
            [parent.id, control.id, cut.id], "eval/accuracy", "0", "sharing", 0
        )

    picker = next(c for c in _walk(page) if getattr(c, "id", None) == "curves-runs")
    assert picker.value == [parent.id, control.id, cut.id]
    lines = {t.name: list(t.x) for t in figure.data if t.name}
    assert lines[f"run {cut.id} · lr 0.003 → 0.0003 (from run {parent.id} @4)"] == [4, 5, 6]
    assert lines[f"run {control.id} · control (no change) (from run {parent.id} @4)"] == [4, 5, 6]
    assert [0, 2, 4, 6] in lines.values()  # the parent, whole
    assert [(s.x0, s.line.dash) for s in figure.layout.shapes] == [(4, "dash")]
    ids = {str(parent.id), str(control.id), str(cut.id)}
    styles = {
        t.legendgroup: (t.line.color, t.line.dash)
        for t in figure.data
        if t.name and t.legendgroup in ids
    }
    assert len({colour for colour, _ in styles.values()}) == 3  # each run its own colour
    assert styles[str(control.id)] == lineage_overlay.CONTROL_STYLE
    assert styles[str(cut.id)][1] == "solid"


def _walk(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is not None and not isinstance(child, str):
            yield from _walk(child)
