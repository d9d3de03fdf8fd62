"""The chart builder: one metric of chosen runs against training steps, the runs grouped by
any field the explorer knows (a param, a cell axis, a verdict, a tag), each group drawn as its
mean inside a band over its seeds, optionally smoothed with each run's raw points kept
visible, on a linear or log axis; savable on an experiment and shown on its page.

The x axis is the step, or (`x=time`) the wall time of runs whose points carry a client's
timestamp (MLflow-logged runs do; `webapp.tracking`'s step times): then each run is its own
line, coloured by its group, since runs seldom share an instant to average over.

It draws with the seed-bands view's own code (`webapp.dashboards.seed_bands`: `bands` for
the statistics, clipped to [0, 1] where the metric is a rate, `bands_figure` for the figure),
so a chart here and the panel's /dash/bands agree; what it adds is grouping by any explorer
field, not only a config field, the raw points, and saving.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
from django.http import QueryDict

from vocabulary.names import ACCURACY_KEY, MATRIX_AXES
from webapp.dashboards import labels, seed_bands
from webapp.explorer.fields import ExplorerError, parse_column, parse_sort
from webapp.explorer.query import explore
from webapp.metrics import read_runs_series
from webapp.metrics.models import StepTime

MAX_RUNS = 500
MAX_POINTS = 2000  # per run's series, downsampled keeping peaks and gaps
X_AXES = {"step": "Step", "time": "Wall time"}


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
    x = params.get("x") or "step"
    if x not in X_AXES:
        raise ExplorerError(f"x must be one of {', '.join(X_AXES)}, not {x!r}.")
    spec = {"runs": runs, "key": key, "by": by, "smooth": smooth, "scale": scale}
    return {**spec, "raw": raw_points, "x": x}


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
    if spec.get("x") == "time":
        return _by_time(runs, label, spec)
    groups = seed_bands.bands(runs, label, spec["smooth"], spec["key"])
    fig = seed_bands.bands_figure(groups, spec["key"], label, band="ci", scale=spec["scale"])
    if spec.get("raw") and spec["smooth"] != "0":
        _raw_points(fig, runs)
    return fig


def _step_times(run_ids: list[int]) -> dict[int, dict[int, int]]:
    """{run: {step: the client's timestamp in ms}}, for the runs that logged times."""
    out: dict[int, dict[int, int]] = {}
    rows = StepTime.objects.filter(run_id__in=run_ids).values_list("run_id", "step", "timestamp")
    for run_id, step, stamp in rows:
        out.setdefault(run_id, {})[step] = stamp
    return out


def _by_time(runs: list[dict[str, Any]], label: str, spec: dict[str, Any]) -> go.Figure:
    """Each run's points at their wall time (UTC), one line a run, coloured by its group; a
    run without times is left out, and the title says how many were."""
    times = _step_times([run["id"] for run in runs])
    timed = [run for run in runs if times.get(run["id"])]
    if not timed:
        raise ExplorerError(
            "None of these runs' points carry a time (MLflow-logged runs do): chart by step."
        )
    values = list(dict.fromkeys(run["config"][label] for run in timed))
    colours = dict(zip(values, seed_bands.group_colours(label, values), strict=True))
    fig = go.Figure()
    for run in timed:
        at = times[run["id"]]
        steps, ys = run["series"]
        kept = [(at[s], y) for s, y in zip(steps, ys, strict=True) if s in at]
        value = run["config"][label]
        first = all(t.legendgroup != str(value) for t in fig.data)
        fig.add_trace(
            go.Scatter(
                x=[datetime.fromtimestamp(t / 1000, tz=UTC) for t, _ in kept],
                y=[y for _, y in kept],
                mode="lines+markers",
                line={"color": colours[value]},
                marker={"size": 4},
                name=labels.plot_text(f"{label} = {value}"),
                legendgroup=str(value),
                showlegend=first,
                meta={"run": run["id"]},
                hovertemplate=f"run {run['id']}: %{{x}}, %{{y:.4f}}<extra></extra>",
            )
        )
    left_out = len(runs) - len(timed)
    title = f"{spec['key']} by wall time"
    if left_out:
        title += f" ({left_out} run{'s' if left_out != 1 else ''} without times left out)"
    fig.update_layout(
        title=labels.plot_text(title),
        xaxis={"title": "wall time (UTC)", "type": "date"},
        yaxis={"title": labels.plot_text(spec["key"]), "type": spec["scale"]},
    )
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
    if spec.get("x") == "time":  # the panel's bands are by step
        return None
    if by.kind not in ("params", "attributes") or (
        by.kind == "attributes" and by.name not in MATRIX_AXES
    ):
        return None
    runs = ",".join(map(str, spec["runs"]))
    return f"/dash/bands?runs={runs}&key={spec['key']}&by={by.name}&smooth={spec['smooth']}"
