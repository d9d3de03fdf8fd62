"""The matrix figure coloured by a behaviour metric (`webapp.runs.behaviour_cells`).

The same grid as `figures.matrix_figure` (one heatmap per sharing mode, rows workflow × task,
columns model, a click opens the cell's runs), but the colour is a level, not a change: a
sequential scale from white (0) to deep blue. Shares (every `behav/…` metric but the
vocabulary's `BEHAVIOUR_COUNTS`, the orchestrator's subtask count) are drawn on a fixed 0–1
scale, so a colour means the same in every experiment; a count, such as the mean number of
workers, runs from 0 to the largest cell. Each metric's name on the page is the vocabulary's
(`BEHAVIOURS`). Cells where no run logged the metric (its workflow has no such role) stay blank.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from vocabulary.names import BEHAVIOUR_COUNTS, BEHAVIOURS
from webapp.dashboards import labels
from webapp.dashboards.figures import cell_grid, empty

SEQUENTIAL = [[0.0, "#f7f7f7"], [0.5, "#8fc1de"], [1.0, "#1d4f8c"]]
SCALE_NOTE = (
    "Colour: the metric's final (last logged) or peak (largest) value per run, averaged over "
    "the cell's seeds that logged it. Shares use a fixed 0–1 scale (white 0, deep blue 1); "
    "the orchestrator's subtask count runs from 0 to the largest cell. Blank: no run of the "
    "cell logged it (its workflow has no such role)."
)


def behaviour_name(key: str) -> str:
    return BEHAVIOURS.get(key, key)


def behaviour_matrix_figure(cells: Sequence[dict], key: str, at: str) -> go.Figure:
    """The grid of `behaviour_cells(experiment, key, at)` rows."""
    if not cells:
        return empty("This experiment has no runs yet.")
    values = [c["mean"] for c in cells if c["mean"] is not None]
    if not values:
        return empty(f"No run of this experiment logged {behaviour_name(key)} yet.")
    top = max(max(values), 1.0) if key in BEHAVIOUR_COUNTS else 1.0
    return cell_grid(
        {(c["workflow"], c["task"], c["model"], c["sharing"]): c for c in cells},
        run_ids=lambda c: c["runs"],
        value=lambda c: c["mean"],
        text=_text,
        hover=lambda c, _sharing: _hover(c, key, at),
        scale={"colorscale": SEQUENTIAL, "cmin": 0.0, "cmax": top},
        title=f"{behaviour_name(key)}, {at} value (mean over seeds)",
    )


def _text(cell: dict | None) -> str:
    if cell is None:
        return ""
    if cell["mean"] is None:
        return "not logged"
    return f"<b>{labels.num(cell['mean'])}</b><br>{cell['n']}/{len(cell['runs'])} runs"


def _hover(cell: dict | None, key: str, at: str) -> str:
    if cell is None:
        return "no runs in this cell"
    name = labels.cell_label(cell["workflow"], cell["task"], cell["model"])
    per_run = ", ".join(
        f"#{run}: {'—' if value is None else labels.num(value, 3)}"
        for run, value in cell["values"].items()
    )
    return "<br>".join(
        [
            f"<b>{labels.plot_text(name)}</b>",
            labels.plot_text(labels.sharing_name(cell["sharing"])),
            f"{behaviour_name(key)} ({key}), {at} value per run: {per_run}",
            "<i>click to compare these runs</i>",
        ]
    )
