"""The gradient-dynamics view, /dash/gradients?runs=3,7: per run, each role's gradient norm
(log scale), the roles' shares of their policy's gradient (stacked under a shared policy)
and the pairwise gradient cosines, with each role's amplification onset and the cliff onset
drawn as lines. The table answers the study's two open questions run by run: does a role's
gradient amplify before the cliff (lead = cliff onset − amplification onset), and, under a
shared policy, which role captured it?
"""

from __future__ import annotations

from dash import Input, Output, State, callback, dcc, html

from webapp.dashboards import components, data, figures, state, tables
from webapp.dashboards.episode_clicks import episodes_href
from webapp.runs.summaries import run_summaries


def layout(runs=None, **_ignored) -> html.Div:
    run_ids = state.parse_ids(runs)
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="gradients-url", refresh=False),
            dcc.Location(id="gradients-go", refresh=True),  # a click: that step's episodes
            components.live_timer("gradients-tick"),
            components.header(
                "Gradient dynamics",
                "Per role: how large its gradient is, how much of its policy's gradient it "
                "contributes, and how aligned the gradients on one policy are. A dotted line "
                "marks where a role's gradient norm amplified (above its early median + 3 MAD "
                "for 3 steps); the red dashed line marks the cliff. Click a point to open the "
                "episodes of that step.",
                html.Span(id="gradients-links", className="panel-links"),
            ),
            html.Div(
                className="controls",
                children=[
                    components.runs_control("gradients-runs", run_ids, width="40rem"),
                    components.control(
                        "Image format", components.format_switch("gradients-format")
                    ),
                ],
            ),
            html.Div(id="gradients-status", className="status-line"),
            components.section(
                "Does amplification precede the cliff? Which role captured the policy?",
                html.Ul(id="gradients-findings", className="findings"),
                components.table("gradients-table"),
                note="Lead = cliff onset − amplification onset, in training steps (positive: "
                "the role amplified first). Capture: where two or more roles share one policy, "
                "a role whose share of the gradient exceeds 0.6 in most steps of the run's "
                "last half. Hover a cliff onset for its threshold and test.",
                actions=components.csv_actions("gradients"),
            ),
            components.graph_card("gradients-graph", "troupe-gradients"),
        ],
    )


# --- callbacks: plain functions, registered at the bottom --------------------------------------


run_options = components.run_options


def _gradient_series(runs) -> dict:
    keys = data.metric_keys([r.id for r in runs])
    return data.series(
        [r.id for r in runs], {run_id: data.gradient_keys(ks) for run_id, ks in keys.items()}
    )


def update_gradients(run_ids, _tick):
    """Query → analysis → figure: (figure, dynamics table, findings, status, timer disabled,
    links). Only the first MAX_GRADIENT_RUNS runs are drawn; the table has them all."""
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))
    summaries = run_summaries(runs, gradients=True)
    drawn = runs[: figures.MAX_GRADIENT_RUNS]
    series = _gradient_series(drawn)
    live = data.any_live(runs)
    extra = components.drawn_note(drawn, runs)
    return (
        figures.gradients_figure(drawn, series, summaries),
        components.render_table(tables.DYNAMICS_COLUMNS, tables.dynamics_rows(runs, summaries)),
        [html.Li(text) for text in tables.dynamics_findings(runs, summaries)] if runs else [],
        components.run_status(state.parse_ids(run_ids), runs, live, extra),
        not live,
        components.view_links(
            runs, "← Accuracy curves of these runs", state.compare_url([r.id for r in runs])
        ),
    )


def download_table(_clicks, run_ids):
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))
    rows = tables.dynamics_rows(runs, run_summaries(runs, gradients=True))
    return {
        "content": tables.to_csv(rows, tables.DYNAMICS_CSV),
        "filename": "troupe-gradient-dynamics.csv",
        "type": "text/csv",
    }


def download_series(_clicks, run_ids):
    runs = data.runs(data.viewer(), state.parse_ids(run_ids))[: figures.MAX_GRADIENT_RUNS]
    return {
        "content": tables.series_csv(runs, _gradient_series(runs)),
        "filename": "troupe-gradient-series.csv",
        "type": "text/csv",
    }


def sync_url(run_ids) -> str:
    return state.query(runs=state.parse_ids(run_ids))


def image_format(fmt):
    """(config, figure patch): the camera button's format; see figures.image_format."""
    return figures.image_format(fmt, "troupe-gradients")


callback(Output("gradients-runs", "options"), Input("gradients-runs", "value"))(run_options)
callback(
    Output("gradients-graph", "figure"),
    Output("gradients-table", "children"),
    Output("gradients-findings", "children"),
    Output("gradients-status", "children"),
    Output("gradients-tick", "disabled"),
    Output("gradients-links", "children"),
    Input("gradients-runs", "value"),
    Input("gradients-tick", "n_intervals"),
)(update_gradients)
callback(
    Output("gradients-download", "data"),
    Input("gradients-csv", "n_clicks"),
    State("gradients-runs", "value"),
    prevent_initial_call=True,
)(download_table)
callback(
    Output("gradients-series-download", "data"),
    Input("gradients-series-csv", "n_clicks"),
    State("gradients-runs", "value"),
    prevent_initial_call=True,
)(download_series)
callback(
    Output("gradients-url", "search"), Input("gradients-runs", "value"), prevent_initial_call=True
)(sync_url)
callback(
    Output("gradients-go", "href"), Input("gradients-graph", "clickData"), prevent_initial_call=True
)(episodes_href)
components.connect_format_switch("gradients", image_format)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/gradients", "name": "Gradients", "title": "Gradient dynamics · Troupe"}
