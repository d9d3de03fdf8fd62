"""The compare view's lineage overlay: a parent and its branches on one figure.

`/dash/compare?run=<id>&lineage=1` selects the run and its branches (`lineage.family_of`;
for a branch, its parent's family). Whatever the selection, each selected run that is a branch
of another selected run is drawn from its branch step on, named by its change ("run 15 · lr
0.01 → 0.001 (from run 12 @4)"), in a colour of its own (a parent and its branches usually
share a cell, so colouring by sharing mode or seed would draw them alike; a control
continuation is grey and dashed, as it often retraces its parent), and each branch step gets
a dashed vertical line. The data logic is `webapp/runs/lineage.py`'s; this module only
applies it to the page's runs, series and figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from webapp.dashboards.figures import GAPS_META, PALETTE
from webapp.ids import whole_number
from webapp.runs.lineage import Branching, branchings, family_of, from_branch_step

BRANCH_LINE = {"color": "#6b7280", "dash": "dash", "width": 1.5}
# Changes take the panel's palette after its first (blue, the shared mode's hue) colour.
CHANGE_COLOURS = [c for c in PALETTE[1:] if c not in ("#7f7f7f", "#000000")]
CONTROL_STYLE = ("#7f7f7f", "dash")


def lineage_ids(run, lineage) -> list[int] | None:
    """The run ids `?run=<id>&lineage=1` selects, or None when the URL asks for no lineage."""
    text = (run[-1] if isinstance(run, list) and run else run) or ""
    flag = (lineage[-1] if isinstance(lineage, list) and lineage else lineage) or ""
    number = whole_number(text)
    if str(flag) not in ("1", "true", "on") or number is None:
        return None
    family = family_of(number)
    return family.run_ids if family else None


def apply(runs: Sequence, series: dict[int, dict]) -> dict[int, Branching]:
    """Trim each branch's series to start at its branch step and name it by its change (on
    the page's own run objects, so the legend and the table say it). Returns the branchings."""
    found = branchings(list(runs))
    for run in runs:
        branching = found.get(run.id)
        if branching is None:
            continue
        run.name = f"{branching.change} (from run {branching.parent_id} @{branching.step})"
        for key, points in (series.get(run.id) or {}).items():
            series[run.id][key] = from_branch_step(points, branching.step)
    return found


def mark(figure: go.Figure, found: dict[int, Branching]) -> go.Figure:
    """Each branch's traces in its own colour, and a dashed vertical line at each branch step
    labelled with the parents branched there."""
    styles, changes = {}, 0
    for run_id, branching in sorted(found.items()):
        if branching.control:
            styles[str(run_id)] = CONTROL_STYLE
        else:
            styles[str(run_id)] = (CHANGE_COLOURS[changes % len(CHANGE_COLOURS)], "solid")
            changes += 1
    for trace in figure.data:  # curves_figure groups each run's traces by its id
        style = styles.get(getattr(trace, "legendgroup", None))
        if style is None or trace.meta == GAPS_META:  # a gap's × stays red
            continue
        trace.marker.color = style[0]
        if getattr(trace, "line", None) is not None:
            trace.line.color = style[0]
            if trace.name:  # the run's curve, not its peak or cliff marker
                trace.line.dash = style[1]
    by_step: dict[int, set[int]] = {}
    for branching in found.values():
        by_step.setdefault(branching.step, set()).add(branching.parent_id)
    for step, parents in sorted(by_step.items()):
        names = ", ".join(f"run {p}" for p in sorted(parents))
        figure.add_vline(
            x=step,
            line=BRANCH_LINE,
            annotation_text=f"branch of {names} @{step}",
            annotation_position="top right",
            annotation_font={"size": 11, "color": BRANCH_LINE["color"]},
        )
    return figure
