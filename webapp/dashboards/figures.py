"""The panel's Plotly figures, built from query results and `analysis` summaries.

No queries and no verdicts here: a figure draws numbers it is given (a cell's gain, a run's
cliff onset, a role's amplification onset) and only reshapes them for the eye — colours,
order, the optional display smoothing of a curve. Every figure can be exported as PNG or SVG
from its mode bar (`graph_config`); plotly.js renders the image in the browser, so export
works with no network.
"""

from __future__ import annotations

import math
import textwrap
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import Patch
from plotly.subplots import make_subplots

from analysis.cells import CellSummary
from analysis.gaps import gap_marks, gap_title, lone_points
from analysis.runs import RunSummary
from analysis.smoothing import centred_mean
from vocabulary.names import (
    ACCURACY_KEY,
    GRAD_COS_PREFIX,
    GRAD_NORM,
    GRAD_SHARE,
    PER_AGENT,
    PER_ROLE,
    SHARED,
    role_key,
    roles_in,
)
from webapp.dashboards import labels

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
INK, MUTED, GRID, CLIFF = "#1f2933", "#616e7c", "#e4e7eb", "#b42318"
# Colour-blind-safe (Okabe–Ito) hues for seeds and roles; sharing modes get Troupe's accent,
# an orange and a purple, so "shared vs isolated" reads at a glance.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#7f7f7f", "#000000"]
SHARING_COLOURS = {SHARED: "#2f5fd0", PER_ROLE: "#d9731a", PER_AGENT: "#7b4fb3"}
ROLE_COLOURS = {
    "generator": "#0072B2",
    "aggregator": "#E69F00",
    "evaluator": "#009E73",
    "orchestrator": "#CC79A7",
    "worker": "#D55E00",
    "synthesizer": "#56B4E9",
    "solver": "#0072B2",
}
SHARING_DASHES = {SHARED: "solid", PER_ROLE: "dash", PER_AGENT: "dot"}
# Pairwise cosines: muted hues, apart from the role colours they share a legend with.
PAIR_COLOURS = ["#3d4b5c", "#8f6bb3", "#2a9d8f", "#b5838d", "#6b705c", "#9c6644"]
# Red (lost accuracy) through white (no change) to teal-blue (gained): the matrix's colours.
DIVERGING = [
    [0.0, "#c2413b"],
    [0.25, "#ec9a8c"],
    [0.5, "#f7f7f7"],
    [0.75, "#8fc1de"],
    [1.0, "#2c6fb0"],
]
MAX_GRADIENT_RUNS = 6  # runs drawn in the gradient view; its table lists every selected run
MAX_CURVES = 100  # runs drawn in the compare view (a legend of more helps nobody)


def graph_config(fmt: str = "png", filename: str = "troupe") -> dict[str, Any]:
    """dcc.Graph `config`: the mode bar's camera button downloads `filename.<fmt>`."""
    fmt = fmt if fmt in ("png", "svg") else "png"
    return {
        "displaylogo": False,
        "displayModeBar": True,
        "responsive": True,
        # No "Share chart…": it uploads the figure to Plotly's cloud. Data stays here.
        "showSendToCloud": False,
        "showEditInChartStudio": False,
        "plotlyServerURL": "",
        "modeBarButtonsToRemove": ["lasso2d", "select2d", "sendChartToCloud", "sendDataToCloud"],
        # scale 2: a PNG sharp enough for slides; SVG is resolution-free anyway.
        "toImageButtonOptions": {
            "format": fmt,
            "filename": filename,
            "scale": 2 if fmt == "png" else 1,
        },
    }


def image_format(fmt: str, filename: str) -> tuple[dict[str, Any], Patch]:
    """What switching PNG/SVG sends: the new config, and a one-field patch of the figure.
    dcc.Graph re-reads its config only when its figure changes, and the patch changes it for
    the price of a few bytes instead of sending the whole figure back and forth."""
    patch = Patch()
    patch["layout"]["meta"] = {"image_format": fmt}
    return graph_config(fmt, filename), patch


def _layout(fig: go.Figure, **extra: Any) -> go.Figure:
    settings = {
        # No template: applying plotly_white costs 20–80 ms a figure, most of a warm matrix
        # refresh; the few settings it brought are spelled out here and below.
        "template": "none",
        "colorway": PALETTE,
        "font": {"family": FONT, "size": 13, "color": INK},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
        "hoverlabel": {"font": {"family": FONT, "size": 12}},
    }
    fig.update_layout(**{**settings, **extra})
    axes = {"gridcolor": GRID, "zeroline": False, "linecolor": "#9aa5b1", "automargin": True}
    fig.update_xaxes(showgrid=True, showline=True, **axes)
    fig.update_yaxes(showgrid=True, **axes)
    fig.update_annotations(font={"family": FONT, "size": 13, "color": INK})
    return fig


def styled(fig: go.Figure, **extra: Any) -> go.Figure:
    """The panel's look for a figure built elsewhere (the attribution page's bars)."""
    return _layout(fig, **extra)


def empty(message: str, height: int = 320) -> go.Figure:
    """A blank figure that says why it is blank."""
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        showarrow=False,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        font={"size": 15, "color": MUTED},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, height=height)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def role_colour(role: str) -> str:
    return ROLE_COLOURS.get(role) or colour(zlib.crc32(role.encode()))


# --- the matrix ----------------------------------------------------------------------------------


def matrix_figure(cells: Sequence[CellSummary], colour_by: str = "gain") -> go.Figure:
    """One heatmap per sharing mode, side by side: rows workflow × task, columns model; each
    cell coloured by the mean `gain` (or `final_gain`) over its seeds and annotated with
    base → peak → final and its cliffs. `customdata` carries the cell's run ids for clicks."""
    if not cells:
        return empty("This experiment has no runs yet.")
    field = "final_gain" if colour_by == "final_gain" else "gain"
    values = [getattr(c, field).mean for c in cells if getattr(c, field).mean is not None]
    if not values:  # a heatmap of nothing but gaps draws NaN paths in the browser
        return empty("No evaluations yet: each cell fills in once its runs have evaluated.")
    span = max([abs(v) for v in values] + [0.05])  # symmetric, so white means "no change"
    title = "final gain (final − base)" if field == "final_gain" else "gain (peak − base)"
    return cell_grid(
        {(c.workflow, c.task, c.model, c.sharing): c for c in cells},
        run_ids=lambda c: c.runs,
        value=lambda c: getattr(c, field).mean,
        text=lambda c: _cell_text(c, field),
        hover=_cell_hover,
        scale={"colorscale": DIVERGING, "cmin": -span, "cmax": span},
        title=title,
    )


def cell_grid(
    cells: Mapping[tuple[str, str, str, str], Any],
    *,
    run_ids: Callable[[Any], Sequence[int]],
    value: Callable[[Any], float | None],
    text: Callable[[Any | None], str],
    hover: Callable[[Any | None, str], str],
    scale: dict,
    title: str,
) -> go.Figure:
    """The experiment's matrix grid: one heatmap per sharing mode, rows workflow × task,
    columns model. `cells` maps each (workflow, task, model, sharing) to its cell; `run_ids`,
    `value`, `text` and `hover(cell, sharing)` read a cell (None where the grid has no runs);
    `scale` is the colour axis (colorscale, cmin, cmax); `customdata` carries each cell's run
    ids, so a click opens them."""
    sharings = labels.sharing_order({sharing for _, _, _, sharing in cells})
    row_keys = [
        (w, t)
        for w in labels.workflow_order({w for w, _, _, _ in cells})
        for t in labels.task_order({t for _, t, _, _ in cells})
        if any(cw == w and ct == t for cw, ct, _, _ in cells)
    ]
    models = labels.model_order({m for _, _, m, _ in cells})
    fig = make_subplots(
        rows=1,
        cols=len(sharings),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[labels.plot_text(labels.sharing_name(s)) for s in sharings],
    )
    y = [labels.plot_text(labels.cell_label(w, t)) for w, t in row_keys]
    for col, sharing in enumerate(sharings, start=1):
        z, texts, hovers, runs = [], [], [], []
        for w, t in row_keys:
            row = [cells.get((w, t, m, sharing)) for m in models]
            z.append([c and value(c) for c in row])
            texts.append([text(c) for c in row])
            hovers.append([hover(c, sharing) for c in row])
            runs.append([",".join(map(str, run_ids(c))) if c else "" for c in row])
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=[labels.plot_text(m) for m in models],
                y=y,
                text=texts,
                texttemplate="%{text}",
                hovertext=hovers,
                hovertemplate="%{hovertext}<extra></extra>",
                customdata=runs,
                coloraxis="coloraxis",
                xgap=4,
                ygap=4,
                textfont={"size": 13},
            ),
            row=1,
            col=col,
        )
    height = 140 + 88 * len(row_keys)
    lines = colour_bar_lines(title, height)
    _layout(
        fig,
        height=height,
        # Room on the right for every line of the colour bar's title (read sideways).
        margin={"l": 150, "r": 30 + 16 * len(lines), "t": 60, "b": 50},
        coloraxis={
            **scale,
            "colorbar": {
                "title": {"text": "<br>".join(lines), "side": "right"},
                "thickness": 14,
            },
        },
    )
    fig.update_yaxes(autorange="reversed", showgrid=False, ticks="")
    fig.update_xaxes(showgrid=False, side="bottom", ticks="")
    return fig


def colour_bar_lines(title: str, height: float, char_px: float = 7.0) -> list[str]:
    """A colour bar's title as lines that fit beside the bar: it reads sideways along the
    plot's height, and a one-row grid is shorter than "evaluator accepts wrong, final value
    (mean over seeds)", which was cut off."""
    width = max(12, int((height - 110) / char_px))
    return textwrap.wrap(title, width) or [title]


def _cell_text(cell: CellSummary | None, field: str) -> str:
    if cell is None:
        return ""
    if cell.base is None:
        return "no evaluations yet"
    value = labels.signed(getattr(cell, field).mean)
    arrow = " → ".join(labels.num(x) for x in (cell.base, cell.peak, cell.final))
    cliffs = f"cliffs {cell.cliffs_text}"
    if cell.n_cliffs or cell.n_degraded:
        cliffs = f"<span style='color:{CLIFF}'>{cliffs}</span>"
    return f"<b>{value}</b><br>{arrow}<br>{cliffs}"


def _cell_hover(cell: CellSummary | None, sharing: str) -> str:
    if cell is None:
        return "no runs in this cell"
    cell_name = labels.cell_label(cell.workflow, cell.task, cell.model)
    lines = [
        f"<b>{labels.plot_text(cell_name)}</b>",
        labels.plot_text(labels.sharing_name(sharing)),
        f"{cell.n_seeds} seed(s): {', '.join(map(str, cell.seeds))}",
    ]
    for estimate, name in ((cell.gain, "gain"), (cell.final_gain, "final gain")):
        ci = ""
        if estimate.low is not None:
            low, high = labels.signed(estimate.low), labels.signed(estimate.high)
            ci = f" (95% CI {low} … {high})"
        lines.append(f"{name} {labels.signed(estimate.mean)}{ci}")
    lines.append(
        "base → peak → final: "
        + " → ".join(labels.num(x, 3) for x in (cell.base, cell.peak, cell.final))
    )
    if cell.n_judged:
        lines.append(f"terminal cliff in {cell.n_cliffs} of {cell.n_judged} seed(s)")
    if cell.n_degraded:
        lines.append(f"fell below the base with no learned peak in {cell.n_degraded} seed(s)")
    lines.append("<i>click to compare these runs</i>")
    return "<br>".join(lines)


# --- curves --------------------------------------------------------------------------------------


def run_styles(runs: Sequence, colour_by: str) -> dict[int, tuple[str, str]]:
    """{run id: (colour, dash)}, the dash always the run's sharing mode. By sharing mode: a
    colour per run (four shared runs of one seed were four identical lines); by
    seed: one colour per seed, so a seed's runs under each mode share it."""
    seeds = sorted({run.seed for run in runs})
    styles = {}
    for index, run in enumerate(runs):
        i = seeds.index(run.seed) if colour_by == "seed" else index
        styles[run.id] = (colour(i), SHARING_DASHES.get(run.sharing, "solid"))
    return styles


def curves_figure(
    runs: Sequence,
    series: dict[int, dict[str, dict]],
    summaries: dict[int, dict],
    key: str,
    smooth_window: int = 0,
    colour_by: str = "sharing",
) -> go.Figure:
    """`key` for every run overlaid; the peak (★) and the cliff onset (✕ and a dotted line)
    of each run's accuracy from its summary. With smoothing, the raw line stays, faint. A
    point with no finite value (NaN, ±inf: a gap, None) breaks the line, and a red × marks it
    (`_add_gaps`)."""
    drawn = [run for run in runs if series.get(run.id, {}).get(key, {}).get("steps")]
    if not drawn:
        return empty(
            f"No {labels.plot_text(key)} points for the selected runs yet."
            if runs
            else "Choose runs to compare."
        )
    fig = go.Figure()
    styles = run_styles(drawn, colour_by)
    is_accuracy = key == ACCURACY_KEY
    has_gaps = False
    for run in drawn:
        points, style = series[run.id][key], styles[run.id]
        has_gaps = _run_curve(fig, run, points, style, is_accuracy, smooth_window) or has_gaps
        accuracy = RunSummary.of(summaries.get(run.id)).accuracy
        if is_accuracy and accuracy.peak_step is not None:
            _peak_marker(fig, run, accuracy, style[0])
        if accuracy.cliff_onset is not None:
            _cliff_onset(fig, run, accuracy, points, style[0], is_accuracy)
    if is_accuracy:
        _legend_marker(fig, "peak", {"symbol": "star", "size": 13, "color": MUTED})
    if has_gaps:
        _legend_marker(fig, "NaN/inf: the line breaks", GAP_MARKER)
    if any(RunSummary.of(summaries.get(r.id)).accuracy.cliff_onset is not None for r in drawn):
        _legend_marker(
            fig,
            "cliff onset (dotted line)",
            {"symbol": "x-thin", "size": 13, "color": CLIFF, "line": {"color": CLIFF, "width": 3}},
        )
    return curve_layout(fig, key)


def _run_curve(
    fig: go.Figure, run, points: dict, style: tuple[str, str], is_accuracy: bool, smooth_window: int
) -> bool:
    """One run's line (over its faint raw line when smoothed) and the × of its gaps; True if
    it has a gap."""
    steps, raw = points["steps"], points["values"]
    line_colour, dash = style
    label = labels.plot_text(labels.run_label(run))
    group = str(run.id)
    values = centred_mean(raw, smooth_window)
    if smooth_window > 1:
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=raw,
                mode="lines",
                line={"color": line_colour, "width": 1},
                opacity=0.3,
                legendgroup=group,
                showlegend=False,
                hoverinfo="skip",
            )
        )
    mode, marker = "lines+markers" if is_accuracy and len(steps) <= 60 else "lines", {"size": 5}
    if mode == "lines" and (dots := lone_dots(values)):
        mode, marker = dots["mode"], dots["marker"]
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=values,
            name=label,
            legendgroup=group,
            mode=mode,
            line={"color": line_colour, "dash": dash, "width": 2.2},
            marker=marker,
            customdata=[run.id] * len(steps),  # a click opens that step's episodes
            hovertemplate=f"{label}<br>step %{{x}}: %{{y:.4f}}<extra></extra>",
        )
    )
    return _add_gaps(fig, steps, raw, group, label)


def _peak_marker(fig: go.Figure, run, accuracy, line_colour: str) -> None:
    """A ★ at the run's accuracy peak."""
    fig.add_trace(
        go.Scatter(
            x=[accuracy.peak_step],
            y=[accuracy.peak],
            mode="markers",
            marker={
                "symbol": "star",
                "size": 15,
                "color": line_colour,
                "line": {"color": "white", "width": 1},
            },
            legendgroup=str(run.id),
            showlegend=False,
            hovertemplate=f"run {run.id}: peak {accuracy.peak:.3f} at step "
            f"{accuracy.peak_step}<extra></extra>",
        )
    )


def _cliff_onset(
    fig: go.Figure, run, accuracy, points: dict, line_colour: str, is_accuracy: bool
) -> None:
    """A dotted line at the run's cliff onset and, on the accuracy curve, a red ✕ on it."""
    onset = accuracy.cliff_onset
    fig.add_vline(x=onset, line={"color": line_colour, "dash": "dot", "width": 1.5})
    y_at = _value_at(points["steps"], points["values"], onset) if is_accuracy else None
    if y_at is None:
        return
    verdict = labels.plot_text(accuracy.label)  # "provisional cliff @140", as every page says
    fig.add_trace(
        go.Scatter(
            x=[onset],
            y=[y_at],
            mode="markers",
            marker={
                "symbol": "x-thin",
                "size": 16,
                "color": CLIFF,
                "line": {"color": CLIFF, "width": 3},
            },
            legendgroup=str(run.id),
            showlegend=False,
            hovertemplate=f"run {run.id}: {verdict}<extra></extra>",
        )
    )


def curve_layout(fig: go.Figure, key: str) -> go.Figure:
    """The look of a figure of one key over training steps (the compare view, seed bands)."""
    _layout(
        fig,
        height=520,
        hovermode="closest",
        # Below the x-axis title: above the plot it would run under the mode bar.
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "font": {"size": 12}},
        margin={"l": 70, "r": 30, "t": 40, "b": 90},
    )
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text=labels.plot_text(labels.key_name(key)))
    return fig


def _legend_marker(fig: go.Figure, name: str, marker: dict) -> None:
    """A legend entry explaining a marker, with no point of its own."""
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=marker, name=name))


def _value_at(steps: Sequence, values: Sequence, step: int | float) -> float | None:
    if not steps:
        return None
    i = int(np.argmin([abs(s - step) for s in steps]))
    return values[i]


GAPS_META = "gaps"  # a gap trace's `meta`: restyling a run's traces leaves it red
GAP_MARKER = {"symbol": "x-thin", "size": 10, "color": CLIFF, "line": {"color": CLIFF, "width": 2}}


def lone_dots(values: Sequence, size: int = 5) -> dict[str, Any]:
    """Scatter settings that put a dot on each of `lone_points` (nothing else gets one); {}
    when there is none."""
    lone = lone_points(values)
    if not any(lone):
        return {}
    return {"mode": "lines+markers", "marker": {"size": [size if one else 0 for one in lone]}}


def _add_gaps(
    fig: go.Figure, steps: Sequence, values: Sequence, group: str, label: str, **where: int
) -> bool:
    """A red × at each gap of one drawn series (`where`: its subplot's row and col); True if
    the series has a gap. The line itself breaks there already: plotly never joins over None."""
    marks = [(step, level) for step, level in gap_marks(steps, values) if level is not None]
    if not marks:
        return False
    xs, ys = zip(*marks, strict=True)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker=GAP_MARKER,
            meta=GAPS_META,
            legendgroup=group,
            showlegend=False,
            text=[gap_title(step) for step in xs],
            hovertemplate=f"{label}: %{{text}}<extra></extra>",
        ),
        **where,
    )
    return True


# --- gradient dynamics ----------------------------------------------------------------------------


def gradients_figure(
    runs: Sequence, series: dict[int, dict[str, dict]], summaries: dict[int, dict]
) -> go.Figure:
    """One row per run (at most MAX_GRADIENT_RUNS): per-role gradient norm (log scale), the
    roles' shares of their policy's gradient (stacked when one policy is shared) and the
    pairwise cosines; dotted lines mark each role's amplification onset in its colour, a red
    dashed line the cliff onset, a red × a point with no finite value (the line breaks)."""
    runs = list(runs)[:MAX_GRADIENT_RUNS]
    if not runs:
        return empty("Choose runs to see their gradient dynamics.")
    if not any(series.get(run.id) for run in runs):  # empty log axes draw NaN paths
        return empty("No gradient points yet: they appear once the runs train a step.")
    row_px, head_px = 280, 170
    height = head_px + row_px * len(runs)
    fig = make_subplots(
        rows=len(runs),
        cols=3,
        subplot_titles=[
            "Gradient norm per role (log scale)",
            "Share of the policy's gradient",
            "Cosine between gradients on one policy",
        ],
        horizontal_spacing=0.06,
        vertical_spacing=(100 / height) if len(runs) > 1 else 0.0,
        column_widths=[0.4, 0.3, 0.3],
    )
    pair_names = sorted(
        {k for run in runs for k in series.get(run.id, {}) if k.startswith(GRAD_COS_PREFIX)}
    )
    pair_colours = {name: PAIR_COLOURS[i % len(PAIR_COLOURS)] for i, name in enumerate(pair_names)}
    shown: set[str] = set()
    gaps = False
    for r, run in enumerate(runs, start=1):
        points = series.get(run.id, {})
        summary = RunSummary.of(summaries.get(run.id))
        _row_title(fig, r, run, summary)
        roles = roles_in(points)
        for role in roles:
            gaps = _role_gradients(fig, r, run, role, points, shown) or gaps
        pairs = [k for k in pair_names if k in points]
        for key in pairs:
            gaps = _pair_cosine(fig, r, run, key, points[key], pair_colours[key], shown) or gaps
        if not pairs:
            _hold_panel(fig, r, 3, points)
            _note(fig, r, 3, _no_cosine(run, roles))
        if run.sharing != SHARED and any(role_key(role, GRAD_SHARE) in points for role in roles):
            _note(fig, r, 2, "one policy per role: every share is 1", y=0.4)
        _onset_lines(fig, r, summary)
        _gradient_axes(fig, r, points)
    _legend_line(fig, "amplification onset (dotted, role colour)", MUTED, "dot")
    _legend_line(fig, "cliff onset", CLIFF, "dash")
    if gaps:
        _legend_marker(fig, "NaN/inf: the line breaks", GAP_MARKER)
    _layout(
        fig,
        height=height,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1 + 62 / height, "x": 0},
        margin={"l": 60, "r": 20, "t": 140, "b": 50},
    )
    fig.update_xaxes(title_text="training step", row=len(runs))
    fig.update_xaxes(rangemode="nonnegative")  # steps start at 0: no axis reaching below it
    return fig


def _role_gradients(fig: go.Figure, r: int, run, role: str, points: dict, shown: set[str]) -> bool:
    """One role's gradient norm (column 1) and share (column 2) in row `r`, with the × of
    their gaps; True if either has a gap."""
    gaps = False
    shown_role = labels.plot_text(role)
    role_line = {"color": role_colour(role), "width": 1.8}
    norm = points.get(role_key(role, GRAD_NORM))
    if norm:
        fig.add_trace(
            go.Scatter(
                x=norm["steps"],
                y=norm["values"],
                name=shown_role,
                legendgroup=f"role:{role}",
                showlegend=_first(shown, f"role:{role}"),
                line=role_line,
                customdata=[run.id] * len(norm["steps"]),  # a click: the episodes
                hovertemplate=_hover(f"{shown_role} ‖g‖", ".3g", run.id),
                **lone_dots(norm["values"], 4),
            ),
            row=r,
            col=1,
        )
        gaps = (
            _add_gaps(
                fig,
                norm["steps"],
                norm["values"],
                f"role:{role}",
                f"{shown_role} ‖g‖",
                row=r,
                col=1,
            )
            or gaps
        )
    share = points.get(role_key(role, GRAD_SHARE))
    if share:
        stacked = run.sharing == SHARED
        fig.add_trace(
            go.Scatter(
                x=share["steps"],
                y=share["values"],
                name=shown_role,
                legendgroup=f"role:{role}",
                showlegend=_first(shown, f"role:{role}"),
                line=role_line,
                stackgroup=f"share{r}" if stacked else None,
                customdata=[run.id] * len(share["steps"]),
                hovertemplate=_hover(f"{shown_role} share", ".2f", run.id),
            ),
            row=r,
            col=2,
        )
        gaps = (
            _add_gaps(
                fig,
                share["steps"],
                share["values"],
                f"role:{role}",
                f"{shown_role} share",
                row=r,
                col=2,
            )
            or gaps
        )
    return gaps


def _pair_cosine(
    fig: go.Figure, r: int, run, key: str, points: dict, line_colour: str, shown: set[str]
) -> bool:
    """The cosine between two gradients on one policy (column 3 of row `r`), with the × of
    its gaps; True if it has a gap."""
    pair = labels.plot_text(key[len(GRAD_COS_PREFIX) :])
    fig.add_trace(
        go.Scatter(
            x=points["steps"],
            y=points["values"],
            name=f"cos {pair.replace('|', ' · ')}",
            legendgroup=key,
            showlegend=_first(shown, key),
            line={"color": line_colour, "width": 1.4},
            customdata=[run.id] * len(points["steps"]),
            hovertemplate=_hover(f"cos({pair})", ".2f", run.id),
            **lone_dots(points["values"], 4),
        ),
        row=r,
        col=3,
    )
    return _add_gaps(fig, points["steps"], points["values"], key, f"cos({pair})", row=r, col=3)


def _no_cosine(run, roles: Sequence[str]) -> str:
    """Why a row's cosine panel is empty, truthfully: under a shared policy two roles do share
    it, and the trainer logs their cosine only from a step where both put a nonzero gradient
    on it."""
    if run.sharing == SHARED and len(roles) >= 2:
        return (
            "no cosine logged: no step had two roles' gradients<br>"
            "on the shared policy both nonzero"
        )
    return "no two gradients share a policy in this run"


def _hold_panel(fig: go.Figure, r: int, col: int, points: dict) -> None:
    """An invisible trace over the row's steps, so plotly draws an empty panel (it drops a
    subplot with no trace, and a note meant for it lands in the first panel, stretching that
    panel's x axis below 0 to fit the text)."""
    steps = [s for p in points.values() for s in p["steps"]]
    span = [min(steps), max(steps)] if steps else [0, 1]
    fig.add_trace(
        go.Scatter(x=span, y=[None, None], mode="lines", showlegend=False, hoverinfo="skip"),
        row=r,
        col=col,
    )


def _gradient_axes(fig: go.Figure, r: int, points: dict) -> None:
    """Row `r`'s y axes: log-scaled norms, shares in [0, 1], cosines in [-1, 1]."""
    norms = [v for k, p in points.items() if k.endswith("/grad_norm") for v in p["values"]]
    fig.update_yaxes(type="log", row=r, col=1, **_log_ticks(norms))
    fig.update_yaxes(range=[0, 1.05], row=r, col=2)
    fig.update_yaxes(range=[-1.05, 1.05], row=r, col=3)


def _log_ticks(values: Sequence) -> dict[str, Any]:
    """Ticks at 1, 2 and 5 × 10^k labelled as plain numbers: plotly's own log ticks label
    each digit of a decade ("5" for 0.5), which reads wrong at a glance."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return {}
    lo, hi = min(positive), max(positive)
    ticks = [
        m * 10.0**k
        for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
        if lo / 1.5 <= m * 10.0**k <= hi * 1.5
    ]
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def _row_title(fig: go.Figure, row: int, run, summary: RunSummary) -> None:
    """The run's name above its row, with its verdict: which cliff, if any."""
    cliff = summary.accuracy.cliff_onset
    verdict = f"terminal cliff at step {cliff}" if cliff is not None else "no terminal cliff"
    axis = fig.get_subplot(row, 1)
    top = axis.yaxis.domain[1]
    fig.add_annotation(
        text=f"<b>{labels.plot_text(labels.run_label(run))}</b> · {verdict}",
        xref="paper",
        yref="paper",
        x=0,
        y=top,
        yshift=28 if row == 1 else 22,
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        font={"size": 13, "color": CLIFF if cliff is not None else INK},
    )


def _legend_line(fig: go.Figure, name: str, line_colour: str, dash: str) -> None:
    """A legend entry explaining a kind of line, with no point of its own."""
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="lines",
            name=name,
            line={"color": line_colour, "dash": dash, "width": 2},
        )
    )


def _hover(what: str, fmt: str, run_id: int) -> str:
    return f"{what} %{{y:{fmt}}} at step %{{x}}<extra>run {run_id}</extra>"


def _first(shown: set[str], name: str) -> bool:
    """True the first time a legend entry comes up: one entry per role across all runs."""
    if name in shown:
        return False
    shown.add(name)
    return True


def _note(fig: go.Figure, row: int, col: int, text: str, y: float = 0.5) -> None:
    axis = fig.get_subplot(row, col)
    fig.add_annotation(
        text=text,
        showarrow=False,
        font={"size": 11, "color": MUTED},
        xref=f"{axis.xaxis.plotly_name.replace('axis', '')} domain",
        yref=f"{axis.yaxis.plotly_name.replace('axis', '')} domain",
        x=0.5,
        y=y,
    )


def _onset_lines(fig: go.Figure, row: int, summary: RunSummary) -> None:
    for role, onset in sorted(summary.amplification.items()):
        if onset is None:
            continue
        for col in (1, 2, 3):
            fig.add_vline(
                x=onset,
                row=row,
                col=col,
                line={"color": role_colour(role), "dash": "dot", "width": 1.5},
            )
    cliff = summary.accuracy.cliff_onset
    if cliff is not None:
        for col in (1, 2, 3):
            fig.add_vline(
                x=cliff,
                row=row,
                col=col,
                line={"color": CLIFF, "dash": "dash", "width": 2},
            )
