"""The compare view, /dash/compare?runs=3,7,9&key=eval/accuracy: one metric of several runs
overlaid, with each run's accuracy peak (★) and cliff onset (✕, dotted line), optional display
smoothing, and runs told apart by colour (one per run, or one per seed) with the sharing mode as
the line's dash. The table gives each run's key
results; both the table and the plotted series download as CSV. `?run=<id>&lineage=1` selects
a run and its branches; a branch of a drawn parent starts at its branch step, is named by its
change, and the branch step gets a dashed line (`lineage_overlay.py`).
"""

from __future__ import annotations

from dash import Input, Output, State, callback, dcc, html

from webapp.dashboards import components, data, figures, lineage_overlay, state, tables
from webapp.dashboards.episode_clicks import episodes_href
from webapp.runs.summaries import run_summaries

SMOOTHING = {"0": "Off", "3": "3 points", "5": "5 points", "9": "9 points"}
# The URL keeps "sharing" for the default: the dash shows the mode, a colour each run.
COLOUR_BY = {"sharing": "A colour per run (dash: sharing mode)", "seed": "A colour per seed"}


def layout(
    runs=None, key=None, smooth=None, colour=None, run=None, lineage=None, **_ignored
) -> html.Div:
    # ?run=<id>&lineage=1: the run and its branches (lineage_overlay.py)
    run_ids = lineage_overlay.lineage_ids(run, lineage) or state.parse_ids(runs)
    key = _last(key) or state.DEFAULT_KEY
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="curves-url", refresh=False),
            dcc.Location(id="curves-go", refresh=True),  # a click: that step's episodes
            components.live_timer("curves-tick"),
            components.header(
                "Compare runs",
                "One metric of the selected runs, overlaid. On held-out accuracy, ★ marks each "
                "run's peak and ✕ with a dotted line the onset of a terminal cliff (accuracy "
                "stays below peak − θ to the end; θ = max(half the gain, the drop evaluation "
                "noise could explain): the table shows each run's threshold, and its test on "
                "hover). Click a point to open the episodes of that step.",
                html.Span(id="curves-links", className="panel-links"),
            ),
            html.Div(
                className="controls",
                children=[
                    components.runs_control("curves-runs", run_ids, width="34rem"),
                    components.control(
                        "Metric",
                        dcc.Dropdown(id="curves-key", value=key, options=[key], clearable=False),
                        width="18rem",
                    ),
                    components.control(
                        "Smoothing",
                        components.radio(
                            "curves-smooth", SMOOTHING, state.parse_choice(smooth, SMOOTHING, "0")
                        ),
                    ),
                    components.control(
                        "Colour by",
                        components.radio(
                            "curves-colour",
                            COLOUR_BY,
                            state.parse_choice(colour, COLOUR_BY, "sharing"),
                        ),
                    ),
                    components.control("Image format", components.format_switch("curves-format")),
                ],
            ),
            html.Div(id="curves-status", className="status-line"),
            components.graph_card("curves-graph", "troupe-curves"),
            components.section(
                "Key results",
                components.table("curves-table"),
                note="From each run's full eval/accuracy series (not the downsampled plot). "
                "Gain = peak − base; final = mean of the last three evaluations.",
                actions=components.csv_actions("curves"),
            ),
        ],
    )


def _last(value) -> str:
    return value[-1] if isinstance(value, list) and value else (value or "")


# --- callbacks: plain functions, registered at the bottom --------------------------------------


run_options = components.run_options


def key_options(run_ids) -> list[dict]:
    """Every metric any selected run has logged, accuracy first."""
    chosen = data.runs(data.viewer(), state.parse_ids(run_ids))
    keys = sorted({k for ks in data.metric_keys([r.id for r in chosen]).values() for k in ks})
    keys.sort(key=lambda k: (k != state.DEFAULT_KEY, k))
    return [{"label": k, "value": k} for k in keys]


def update_compare(run_ids, key, smooth, colour, _tick):
    """Query → analysis → figure: (figure, runs table, status, timer disabled, links). Only
    the first MAX_CURVES runs are drawn; the table has them all."""
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))
    drawn = runs[: figures.MAX_CURVES]
    key = key or state.DEFAULT_KEY
    series = data.series([r.id for r in drawn], [key])
    branches = lineage_overlay.apply(drawn, series)  # branches of a drawn parent: from their step
    summaries = run_summaries(runs, gradients=False)
    live = data.any_live(runs)
    figure = figures.curves_figure(
        drawn, series, summaries, key, int(state.parse_choice(smooth, SMOOTHING, "0")), colour
    )
    if branches and figure.data:
        lineage_overlay.mark(figure, branches)
    extra = components.drawn_note(drawn, runs)
    gradients = state.gradients_url([r.id for r in runs])
    return (
        figure,
        components.render_table(tables.RUN_COLUMNS, tables.run_rows(runs, summaries)),
        components.run_status(state.parse_ids(run_ids), runs, live, extra),
        not live,
        components.view_links(runs, "Gradient dynamics of these runs →", gradients, primary=True)
        + components.bands_link(runs),
    )


def download_table(_clicks, run_ids):
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))
    rows = tables.run_rows(runs, run_summaries(runs, gradients=False))
    return {
        "content": tables.to_csv(rows, tables.RUN_CSV),
        "filename": "troupe-runs.csv",
        "type": "text/csv",
    }


def download_series(_clicks, run_ids, key):
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))[: figures.MAX_CURVES]
    key = key or state.DEFAULT_KEY
    series = data.series([r.id for r in runs], [key])
    name = key.replace("/", "_")
    return {
        "content": tables.series_csv(runs, series),
        "filename": f"troupe-{name}.csv",
        "type": "text/csv",
    }


def sync_url(run_ids, key, smooth, colour) -> str:
    return state.query(
        runs=state.parse_ids(run_ids),
        key=key,
        smooth=None if smooth == "0" else smooth,
        colour=None if colour == "sharing" else colour,
    )


def image_format(fmt):
    """(config, figure patch): the camera button's format; see figures.image_format."""
    return figures.image_format(fmt, "troupe-curves")


callback(Output("curves-runs", "options"), Input("curves-runs", "value"))(run_options)
callback(Output("curves-key", "options"), Input("curves-runs", "value"))(key_options)
callback(
    Output("curves-graph", "figure"),
    Output("curves-table", "children"),
    Output("curves-status", "children"),
    Output("curves-tick", "disabled"),
    Output("curves-links", "children"),
    Input("curves-runs", "value"),
    Input("curves-key", "value"),
    Input("curves-smooth", "value"),
    Input("curves-colour", "value"),
    Input("curves-tick", "n_intervals"),
)(update_compare)
callback(
    Output("curves-download", "data"),
    Input("curves-csv", "n_clicks"),
    State("curves-runs", "value"),
    prevent_initial_call=True,
)(download_table)
callback(
    Output("curves-series-download", "data"),
    Input("curves-series-csv", "n_clicks"),
    State("curves-runs", "value"),
    State("curves-key", "value"),
    prevent_initial_call=True,
)(download_series)
callback(
    Output("curves-url", "search"),
    Input("curves-runs", "value"),
    Input("curves-key", "value"),
    Input("curves-smooth", "value"),
    Input("curves-colour", "value"),
    prevent_initial_call=True,
)(sync_url)
callback(
    Output("curves-go", "href"),
    Input("curves-graph", "clickData"),
    State("curves-key", "value"),
    prevent_initial_call=True,
)(episodes_href)
components.connect_format_switch("curves", image_format)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/compare", "name": "Compare", "title": "Compare runs · Troupe"}
