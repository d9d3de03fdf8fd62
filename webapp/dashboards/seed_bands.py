"""The seed-bands figure: runs grouped by one config field, each group drawn as its mean curve
inside a band (the 95% interval of the mean across its runs, or their min … max), optionally
smoothed, on a linear or log y axis.

The statistics are `analysis.bands.group_bands` (torch-free, tested on known answers); this
module only chooses what to ask it and draws the answer. No queries: the page passes each
run's config and full series in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from analysis.bands import group_bands
from vocabulary.names import ACCURACY_KEY, CELL_AXES
from webapp.dashboards import labels
from webapp.dashboards.figures import PALETTE, SHARING_COLOURS, curve_layout, empty

NO_GROUP = "(all)"  # the group-by choice that puts every run in one group (no field has it)
# The default group-by: the whole matrix cell. Grouping by one field (sharing) pools runs of
# different workflows, tasks and models, whose curves have nothing to do with each other.
CELL = "(cell)"
# Display smoothing, applied to each run's own points before the statistics.
SMOOTHING = {
    "0": "Off",
    "ema-0.3": "EMA α 0.3",
    "ema-0.1": "EMA α 0.1",
    "win-5": "Window 5",
    "win-20": "Window 20",
}
BANDS = {"ci": "Mean ± 95% interval", "minmax": "Min … max", "none": "Mean only"}
SCALES = {"linear": "Linear", "log": "Log"}
MAX_BAND_POINTS = 600  # steps drawn per band: the statistics use every point, the eye needs fewer
LEGEND_BELOW_MAX = 6  # groups whose legend fits in a row or two below the plot


def smoothing_options(choice: str) -> dict[str, Any]:
    """`analysis.bands` keyword arguments for a SMOOTHING key ("0", "ema-0.1", "win-5")."""
    method, _, amount = (choice or "0").partition("-")
    if method == "ema":
        return {"smoothing": "ema", "alpha": float(amount)}
    if method == "win":
        return {"smoothing": "rolling", "window": int(amount)}
    return {"smoothing": None}


def group_value(value: Any) -> Any:
    """A config value as a group key: lists and dicts (unhashable) as their JSON text."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def config_fields(configs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(every field any config has, the fields whose value differs between the configs), each
    sorted: the group-by choices, the varying ones offered first."""
    fields = sorted({name for config in configs for name in config})
    varying = [
        name
        for name in fields
        if len({json.dumps(c.get(name), sort_keys=True, default=str) for c in configs}) > 1
    ]
    return fields, varying


def group_of(config: Mapping[str, Any], by: str, branch: str = "") -> Any:
    """A run's group: its value of the field `by` (or its cell, or "all"). A branch (`branch`:
    its change in words) is never a seed of its parent's setting: it makes a group of its own,
    beside the same change's branches of other seeds."""
    if by == NO_GROUP:
        value = "all"
    elif by == CELL:
        value = " · ".join(str(config.get(axis)) for axis in CELL_AXES)
    else:
        value = group_value(config.get(by))
    return f"{value} · branch: {branch}" if branch else value


def value_bounds(key: str) -> tuple[float, float] | None:
    """The values `key` can take, where they are bounded: an accuracy lies in [0, 1]."""
    return (0.0, 1.0) if key == ACCURACY_KEY or key.startswith(ACCURACY_KEY + "/") else None


def bands(
    runs: Sequence[Mapping[str, Any]], by: str, smoothing: str = "0", key: str = ""
) -> list[dict[str, Any]]:
    """`group_bands` of `{"config", "series": (steps, values), "branch"?}` runs by the config
    field `by` (every run in one group when `by` is NO_GROUP, by cell when CELL); the bands
    of `key` clipped to its `value_bounds`."""
    keyed = [
        {
            "config": {"group": group_of(run.get("config") or {}, by, run.get("branch") or "")},
            "series": run["series"],
        }
        for run in runs
    ]
    return group_bands(keyed, "group", bounds=value_bounds(key), **smoothing_options(smoothing))


def group_name(by: str, value: Any, n_runs: int) -> str:
    """'sharing = per_role (3 runs)', the legend's words for one group (not yet escaped)."""
    if by == NO_GROUP:
        what = "all runs" if value == "all" else str(value)
    elif by == CELL:
        what = str(value)
    else:
        what = f"{by} = {'(not set)' if value is None else value}"
    return f"{what} ({n_runs} run{'s' if n_runs != 1 else ''})"


def group_colours(by: str, values: Sequence[Any]) -> list[str]:
    """Sharing modes keep their colours across the panel; anything else takes the palette."""
    if by == "sharing":
        return [SHARING_COLOURS.get(v, PALETTE[i % len(PALETTE)]) for i, v in enumerate(values)]
    return [PALETTE[i % len(PALETTE)] for i in range(len(values))]


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _thin(n: int) -> list[int]:
    """Indices of at most MAX_BAND_POINTS evenly spread steps, first and last included."""
    if n <= MAX_BAND_POINTS:
        return list(range(n))
    stride = (n - 1) / (MAX_BAND_POINTS - 1)
    return sorted({round(i * stride) for i in range(MAX_BAND_POINTS)})


def bands_figure(
    groups: Sequence[Mapping[str, Any]],
    key: str,
    by: str,
    band: str = "ci",
    scale: str = "linear",
) -> go.Figure:
    """One mean line per group (a `bands()` entry) and, unless `band` is "none", its band:
    "ci" the 95% interval of the mean (only where at least two runs logged the step), "minmax"
    the range of the runs. Every name a user chose passes through `plot_text`."""
    groups = [g for g in groups if g["band"]["steps"]]
    if not groups:
        return empty(f"No {labels.plot_text(key)} points for the selected runs yet.")
    fig = go.Figure()
    colours = group_colours(by, [g["value"] for g in groups])
    for group, colour in zip(groups, colours):
        stats = group["band"]
        keep = _thin(len(stats["steps"]))
        steps = [stats["steps"][i] for i in keep]
        name = labels.plot_text(group_name(by, group["value"], group["runs"]))
        legend = f"group-{len(fig.data)}"
        if band != "none":
            low_key, high_key = ("low", "high") if band == "ci" else ("min", "max")
            inside = [i for i in keep if stats[low_key][i] is not None]
            if inside:
                # One closed polygon: along the upper edge, back along the lower one.
                xs = [stats["steps"][i] for i in inside]
                fig.add_trace(
                    go.Scatter(
                        x=xs + xs[::-1],
                        y=[stats[high_key][i] for i in inside]
                        + [stats[low_key][i] for i in inside][::-1],
                        fill="toself",
                        fillcolor=_rgba(colour, 0.18),
                        line={"width": 0},
                        mode="lines",
                        hoverinfo="skip",
                        legendgroup=legend,
                        showlegend=False,
                        name=f"{name}: {BANDS[band]}",
                        meta={"band": band},
                    )
                )
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=[stats["mean"][i] for i in keep],
                customdata=[
                    [
                        stats["n"][i],
                        stats["low"][i],
                        stats["high"][i],
                        stats["min"][i],
                        stats["max"][i],
                    ]
                    for i in keep
                ],
                name=name,
                legendgroup=legend,
                mode="lines",
                line={"color": colour, "width": 2.4},
                hovertemplate=f"{name}<br>step %{{x}}: mean %{{y:.4f}} over %{{customdata[0]}} runs"
                "<br>95% interval %{customdata[1]:.4f} … %{customdata[2]:.4f}"
                "<br>min … max %{customdata[3]:.4f} … %{customdata[4]:.4f}<extra></extra>",
            )
        )
    curve_layout(fig, key)
    if len(groups) > LEGEND_BELOW_MAX:
        # Many groups: a legend below the plot wraps into rows that run over the x-axis title
        # (24 cells did); to the right, one entry a line, the figure as tall as they need.
        fig.update_layout(
            legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
            height=max(520, 140 + 20 * len(groups)),
            margin={"b": 60},
        )
    fig.update_yaxes(type="log" if scale == "log" else "linear")
    return fig
