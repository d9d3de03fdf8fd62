"""The chart builder: one metric of chosen runs against training steps, the runs grouped by
any field the explorer knows (a param, a cell axis, a verdict, a tag), each group drawn as its
mean inside a band over its seeds, optionally smoothed with each run's raw points kept
visible, on a linear or log axis; savable on an experiment and shown on its page.

It draws with the seed-bands view's own code (`webapp.dashboards.seed_bands`: `bands` for
the statistics, clipped to [0, 1] where the metric is a rate, `bands_figure` for the figure),
so a chart here and the panel's /dash/bands agree; what it adds is grouping by any explorer
field, not only a config field, the raw points, and saving.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from django.http import QueryDict

from vocabulary.names import ACCURACY_KEY, MATRIX_AXES
from webapp.dashboards import seed_bands
from webapp.explorer.fields import ExplorerError, parse_column, parse_sort
from webapp.explorer.query import explore
from webapp.metrics import read_runs_series

MAX_RUNS = 500
MAX_POINTS = 2000  # per run's series, downsampled keeping peaks and gaps


def read_spec(params: QueryDict | dict) -> dict[str, Any]:
    """The chart's choices from a query string; ExplorerError names a bad one."""
    raw = params.get("runs", "") or ""
    try:
        runs = [int(i) for i in raw.split(",") if i.strip()]
    except ValueError:
        raise ExplorerError(f"runs must be run numbers separated by commas, not {raw!r}.") from None
    if not runs or len(runs) > MAX_RUNS:
        raise ExplorerError(f"Choose 1 to {MAX_RUNS} runs to chart.")
    by = params.get("by") or "attributes.sharing"
    smooth = params.get("smooth") or "0"
    scale = params.get("scale") or "linear"
    if smooth not in seed_bands.SMOOTHING:
        raise ExplorerError(f"smooth must be one of {', '.join(seed_bands.SMOOTHING)}.")
    if scale not in seed_bands.SCALES:
        raise ExplorerError(f"scale must be one of {', '.join(seed_bands.SCALES)}.")
    parse_column(by)  # refuses what the explorer cannot read
    key = (params.get("key") or ACCURACY_KEY).strip()
    raw_points = str(params.get("raw", "1")) != "0"
    return {"runs": runs, "key": key, "by": by, "smooth": smooth, "scale": scale, "raw": raw_points}


def figure(spec: dict[str, Any]) -> go.Figure:
    """The grouped chart of `spec` (a `read_spec` result)."""
    by = parse_column(spec["by"])
    label = by.name if by.kind == "attributes" else by.spec
    table = explore("", [by], parse_sort(""), 1, MAX_RUNS, only=spec["runs"])
    group = {row["id"]: row["values"][0] for row in table.rows}
    series = read_runs_series(list(group), [spec["key"]], MAX_POINTS)
    runs = [
        {"id": run_id, "config": {label: group[run_id]}, "series": (s["steps"], s["values"])}
        for run_id, found in series.items()
        if (s := found.get(spec["key"]))
    ]
    groups = seed_bands.bands(runs, label, spec["smooth"], spec["key"])
    fig = seed_bands.bands_figure(groups, spec["key"], label, band="ci", scale=spec["scale"])
    if spec.get("raw") and spec["smooth"] != "0":
        _raw_points(fig, runs)
    return fig


def _raw_points(fig: go.Figure, runs: list[dict[str, Any]]) -> None:
    """Each run's logged points, faint, under the smoothed means: smoothing hides no point."""
    for i, run in enumerate(runs):
        steps, values = run["series"]
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=values,
                mode="markers",
                marker={"size": 4, "color": "rgba(90,90,90,0.35)"},
                name="raw points",
                legendgroup="raw",
                showlegend=i == 0,
                hovertemplate=f"run {run['id']}: step %{{x}}, %{{y:.4f}}<extra></extra>",
            )
        )


def panel_link(spec: dict[str, Any]) -> str | None:
    """The same chart in the panel's seed-bands view, where `by` is a config field it groups
    by (a param or a cell axis)."""
    by = parse_column(spec["by"])
    if by.kind not in ("params", "attributes") or (
        by.kind == "attributes" and by.name not in MATRIX_AXES
    ):
        return None
    runs = ",".join(map(str, spec["runs"]))
    return f"/dash/bands?runs={runs}&key={spec['key']}&by={by.name}&smooth={spec['smooth']}"
