"""The seed-bands view, /dash/bands?experiment=5&by=sharing&key=eval/accuracy (or ?runs=3,7,9):
runs grouped by any config field, each group's mean curve of one metric inside a band — the
95% interval of the mean across its runs, or their min … max — with optional smoothing and a
log y axis; below, a table of the runs (their config fields, peak, final and cliff of
held-out accuracy) sortable by any column.

The statistics are `analysis.bands`; `seed_bands.py` draws them and
`run_table.py` builds and sorts the table.
"""

from __future__ import annotations

import dash
from dash import ALL, Input, Output, State, callback, ctx, dcc, html

from webapp.dashboards import components, data, figures, run_table, seed_bands, state
from webapp.runs import lineage
from webapp.runs.seeds import left_out, left_out_note, seed_status
from webapp.runs.summaries import run_summaries

SORT_ID = "bands-sort"


def layout(
    runs=None,
    experiment=None,
    key=None,
    by=None,
    smooth=None,
    band=None,
    scale=None,
    sort=None,
    **_ignored,
) -> html.Div:
    run_ids = state.parse_ids(runs) or data.experiment_run_ids(
        data.viewer(), state.parse_int(experiment)
    )
    key = _last(key) or state.DEFAULT_KEY
    by = _last(by) or seed_bands.CELL
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="bands-url", refresh=False),
            components.live_timer("bands-tick"),
            dcc.Store(id="bands-sort-state", data=parse_sort(sort)),
            components.header(
                "Seed bands",
                "Runs grouped by a config field: each group's mean curve, inside the 95% "
                "interval of that mean across its runs (or their min … max). Seeds of one "
                "setting make a band; settings whose bands do not overlap differ.",
                html.Span(id="bands-links", className="panel-links"),
            ),
            _what_controls(run_ids, key, by),
            _how_controls(band, smooth, scale),
            html.Div(id="bands-status", className="status-line"),
            components.graph_card("bands-graph", "troupe-seed-bands"),
            components.section(
                "Runs",
                components.table("bands-table"),
                note="Click a heading to sort by it (again to reverse). Peak, final (mean of "
                "the last three evaluations) and cliff are of held-out accuracy, whatever "
                "metric the figure shows.",
            ),
        ],
    )


def _what_controls(run_ids, key: str, by: str) -> html.Div:
    """The first row of controls: which runs, which metric, grouped by which field."""
    return html.Div(
        className="controls",
        children=[
            components.runs_control("bands-runs", run_ids, width="34rem"),
            components.control(
                "Metric",
                dcc.Dropdown(id="bands-key", value=key, options=[key], clearable=False),
                width="16rem",
            ),
            components.control(
                "Group by",
                dcc.Dropdown(
                    id="bands-by",
                    value=by,
                    options=components.placeholder_options([by], "{}"),
                    clearable=False,
                ),
                width="14rem",
            ),
        ],
    )


def _how_controls(band, smooth, scale) -> html.Div:
    """The second row: how to draw it (band, smoothing, y axis, image format), each choice
    read from the URL."""
    return html.Div(
        className="controls",
        children=[
            components.control(
                "Band",
                components.radio(
                    "bands-band",
                    seed_bands.BANDS,
                    state.parse_choice(band, seed_bands.BANDS, "ci"),
                ),
            ),
            components.control(
                "Smoothing",
                components.radio(
                    "bands-smooth",
                    seed_bands.SMOOTHING,
                    state.parse_choice(smooth, seed_bands.SMOOTHING, "0"),
                ),
            ),
            components.control(
                "Y axis",
                components.radio(
                    "bands-scale",
                    seed_bands.SCALES,
                    state.parse_choice(scale, seed_bands.SCALES, "linear"),
                ),
            ),
            components.control("Image format", components.format_switch("bands-format")),
        ],
    )


def parse_sort(value) -> dict:
    """'-final' → {"col": "final", "desc": True}; '' → no order (run order)."""
    text = _last(value)
    if not text.lstrip("-"):
        return {}
    return {"col": text.lstrip("-"), "desc": text.startswith("-")}


def _last(value) -> str:
    return value[-1] if isinstance(value, list) and value else (value or "")


# --- callbacks: plain functions, registered at the bottom --------------------------------------


run_options = components.run_options


def field_and_key_options(run_ids) -> tuple[list[dict], list[dict]]:
    """(group-by choices: the config fields that differ between the runs first, then the
    others, then no grouping; metric choices: every key a run logged, accuracy first)."""
    chosen = data.runs(data.viewer(), state.parse_ids(run_ids))
    ids = [r.id for r in chosen]
    fields, varying = seed_bands.config_fields(list(data.configs(ids).values()))
    by = [{"label": "cell: workflow · task · model · sharing", "value": seed_bands.CELL}]
    by += [{"label": f"{f} (differs)", "value": f} for f in varying]
    by += [{"label": f, "value": f} for f in fields if f not in varying]
    by.append({"label": "(no grouping: all runs)", "value": seed_bands.NO_GROUP})
    keys = sorted({k for ks in data.metric_keys(ids).values() for k in ks})
    keys.sort(key=lambda k: (k != state.DEFAULT_KEY, k))
    return by, [{"label": k, "value": k} for k in keys]


def chosen_seeds(run_ids) -> tuple[list, list]:
    """(the chosen runs that are seeds, those left out: failed or cancelled runs have no
    final numbers, `webapp/runs/seeds.py`)."""
    chosen = data.runs(data.viewer(), state.parse_ids(run_ids))
    return [r for r in chosen if seed_status(r.status)], chosen


def update_bands(run_ids, key, by, smooth, band, scale, _tick):
    """Query → bands → figure: (figure, status, timer disabled, links)."""
    runs, chosen = chosen_seeds(run_ids)
    key = key or state.DEFAULT_KEY
    ids = [r.id for r in runs]
    configs = data.configs(ids)
    series = data.series(ids, [key], max_points=0)  # every point: bands align runs by step
    changes = branch_changes(runs)
    groups = seed_bands.bands(
        [
            {
                "config": configs.get(r.id) or {},
                "series": _pair(series[r.id][key]),
                "branch": changes.get(r.id, ""),
            }
            for r in runs
            if key in series.get(r.id, {})
        ],
        by,
        state.parse_choice(smooth, seed_bands.SMOOTHING, "0"),
        key,
    )
    if runs:
        figure = seed_bands.bands_figure(groups, key, by, band, scale)
    elif chosen:
        figure = figures.empty("No seed among these runs: failed and cancelled runs are left out.")
    else:
        figure = figures.empty("Choose runs, or open the view from an experiment.")
    live = data.any_live(runs)
    n_groups = sum(1 for g in groups if g["band"]["steps"])
    extra = f"{n_groups} group{'s' if n_groups != 1 else ''}" if runs else ""
    note = left_out_note(left_out(chosen))
    extra = " · ".join(t for t in (extra, note) if t)
    return (
        figure,
        components.status_line(data.status_counts(chosen), live, extra) if chosen else [],
        not live,
        components.view_links(runs, "Compare these runs →", state.compare_url(ids)),
    )


def branch_changes(runs) -> dict[int, str]:
    """{run id: its change in words} for the branches among `runs` (roots are left out)."""
    branches = [r for r in runs if r.branch_step is not None]
    parents = data.configs([r.parent_id for r in branches if r.parent_id is not None])
    return {
        r.id: lineage.change_text(r.intervention, parents.get(r.parent_id) or {}) for r in branches
    }


def _pair(points: dict) -> tuple[list, list]:
    return points["steps"], points["values"]


def update_table(run_ids, by, sort, _tick):
    runs, _chosen = chosen_seeds(run_ids)
    ids = [r.id for r in runs]
    configs = data.configs(ids)
    _fields, varying = seed_bands.config_fields(list(configs.values()))
    fields = run_table.shown_fields(list(configs.values()), varying)
    group_by = by if by != seed_bands.NO_GROUP and any(by in c for c in configs.values()) else ""
    branches = any(r.branch_step is not None for r in runs)
    columns = run_table.columns(fields, group_by, branches)
    rows = run_table.rows(runs, configs, run_summaries(runs, gradients=False))
    sort = sort or {}
    ordered = run_table.sort_rows(rows, sort.get("col"), bool(sort.get("desc")))
    return components.render_table(columns, ordered, SORT_ID, sort)


def click_sort(clicks, sort):
    """A heading clicked: sort by its column, or reverse the order when it already is."""
    if not ctx.triggered_id or not any(clicks or []):
        return dash.no_update  # headings drawn afresh, nothing clicked
    triggered = [t for t in ctx.triggered if t.get("value")]
    if not triggered:
        return dash.no_update
    column = ctx.triggered_id["col"]
    sort = sort or {}
    if sort.get("col") == column:
        return {"col": column, "desc": not sort.get("desc")}
    return {"col": column, "desc": False}


def sync_url(run_ids, key, by, smooth, band, scale, sort) -> str:
    sort = sort or {}
    return state.query(
        runs=state.parse_ids(run_ids),
        key=key,
        by=None if by == seed_bands.CELL else by,
        smooth=None if smooth == "0" else smooth,
        band=None if band == "ci" else band,
        scale=None if scale == "linear" else scale,
        sort=(("-" if sort.get("desc") else "") + sort["col"]) if sort.get("col") else None,
    )


def image_format(fmt):
    """(config, figure patch): the camera button's format; see figures.image_format."""
    return figures.image_format(fmt, "troupe-seed-bands")


# What the figure and the page's URL both follow: the runs and every figure control.
CONTROLS = tuple(
    Input(f"bands-{name}", "value") for name in ("runs", "key", "by", "smooth", "band", "scale")
)
callback(Output("bands-runs", "options"), Input("bands-runs", "value"))(run_options)
callback(
    Output("bands-by", "options"), Output("bands-key", "options"), Input("bands-runs", "value")
)(field_and_key_options)
callback(
    Output("bands-graph", "figure"),
    Output("bands-status", "children"),
    Output("bands-tick", "disabled"),
    Output("bands-links", "children"),
    *CONTROLS,
    Input("bands-tick", "n_intervals"),
)(update_bands)
callback(
    Output("bands-table", "children"),
    Input("bands-runs", "value"),
    Input("bands-by", "value"),
    Input("bands-sort-state", "data"),
    Input("bands-tick", "n_intervals"),
)(update_table)
callback(
    Output("bands-sort-state", "data"),
    Input({"type": SORT_ID, "col": ALL}, "n_clicks"),
    State("bands-sort-state", "data"),
    prevent_initial_call=True,
)(click_sort)
callback(
    Output("bands-url", "search"),
    *CONTROLS,
    Input("bands-sort-state", "data"),
    prevent_initial_call=True,
)(sync_url)
components.connect_format_switch("bands", image_format)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/bands", "name": "Seed bands", "title": "Seed bands · Troupe"}
