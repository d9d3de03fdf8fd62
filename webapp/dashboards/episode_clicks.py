"""A click on a point of the panel's curves or gradient plots opens that step's episodes.

The figures put the run's id in each line's `customdata` (`figures.curves_figure`,
`figures.gradients_figure`); the clicked point's x is the training step. The episode view
(`webapp/episodes/page_views.py`) snaps the step to the nearest recorded one (`near=1`): a
curve point is rarely a step that recorded episodes. A point of an evaluation metric opens the
evaluation's episodes, any other the training step's.
"""

from __future__ import annotations

import dash


def episodes_href(click_data, key: str | None = None) -> str:
    """The episode view's URL for a clicked point, or `dash.no_update` for a point that is not
    on a run's line (a legend marker, the cliff's ✕)."""
    points = (click_data or {}).get("points") or []
    point = points[0] if points else {}
    run_id, step = point.get("customdata"), point.get("x")
    if isinstance(run_id, list):  # a trace's customdata may come back as a row
        run_id = run_id[0] if run_id else None
    if not isinstance(run_id, int) or isinstance(run_id, bool) or run_id < 1:
        return dash.no_update
    if not isinstance(step, int | float) or isinstance(step, bool) or not step >= 0:
        return dash.no_update
    kind = "eval" if (key or "").startswith("eval/") else "train"
    return f"/runs/{run_id}/episodes/?kind={kind}&step={round(step)}&near=1"
