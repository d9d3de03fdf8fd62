"""The matrix view, /dash/matrix?experiment=5: one grid per sharing mode, rows workflow ×
task, columns model, each cell coloured by its mean gain (or final gain) over seeds and
annotated with base → peak → final and its cliffs, or coloured by a behaviour metric's final
or peak value (`&colour=behaviour&metric=behav/voter_agreement&at=peak`; scale in
`webapp/dashboards/behaviour_matrix.py`). Clicking a cell opens its runs in the
compare view; the table below lists every cell, with a CSV download.

Summaries read `eval/accuracy` alone (all a cell shows) and are cached per run, so a
thousand-run matrix refreshes in the time it takes to re-read the runs that changed.
"""

from __future__ import annotations

import dash
from dash import Input, Output, State, callback, dcc, html

from vocabulary.names import BEHAVIOUR_KEYS, VOTER_AGREEMENT_KEY
from webapp.dashboards import components, data, figures, state, tables
from webapp.dashboards.behaviour_matrix import SCALE_NOTE, behaviour_matrix_figure, behaviour_name
from webapp.runs.behaviour_cells import AT, behaviour_cells
from webapp.runs.seeds import left_out_note
from webapp.runs.summaries import cell_summaries

COLOURS = {
    "gain": "Gain (peak − base)",
    "final_gain": "Final gain (final − base)",
    "behaviour": "A behaviour metric",
}
BEHAVIOURS = {key: behaviour_name(key) for key in BEHAVIOUR_KEYS}
AT_NAMES = {"final": "final value", "peak": "peak value"}


def layout(experiment=None, colour=None, metric=None, at=None, **_ignored) -> html.Div:
    experiment_id = state.parse_int(experiment)
    colour = state.parse_choice(colour, COLOURS, "gain")
    metric = state.parse_choice(metric, BEHAVIOURS, VOTER_AGREEMENT_KEY)
    at = state.parse_choice(at, AT, "final")
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="matrix-url", refresh=False),
            dcc.Location(id="matrix-go", refresh="callback-nav"),
            components.live_timer("matrix-tick"),
            components.header(
                "Matrix",
                "Each cell is one workflow × task × model under one sharing mode, averaged "
                "over its seeds: the colour is the gain over the base model, the numbers are "
                "base → peak → final accuracy and how many seeds fell off a terminal cliff. "
                "Click a cell to compare its runs.",
                html.A(
                    "Seed bands →",
                    id="matrix-bands",
                    href=state.bands_url(experiment_id),
                    className="button secondary",
                ),
                html.A(
                    "Attribution →",
                    id="matrix-attribution",
                    href=state.attribution_url(experiment_id),
                    className="button secondary",
                ),
                html.A("All experiments", href="/dash/", className="button secondary"),
            ),
            html.Div(
                className="controls",
                children=[
                    components.experiment_control("matrix", experiment_id),
                    components.control(
                        "Colour cells by",
                        components.radio("matrix-colour", COLOURS, colour),
                    ),
                    # Used when the colour is "a behaviour metric" (SCALE_NOTE explains it).
                    components.control(
                        "Behaviour metric",
                        dcc.Dropdown(
                            id="matrix-behaviour",
                            value=metric,
                            clearable=False,
                            options=[{"label": v, "value": k} for k, v in BEHAVIOURS.items()],
                        ),
                        width="18rem",
                    ),
                    components.control(
                        "Behaviour value", components.radio("matrix-behaviour-at", AT_NAMES, at)
                    ),
                    components.control("Image format", components.format_switch("matrix-format")),
                ],
            ),
            html.Div(id="matrix-status", className="status-line"),
            html.P(
                SCALE_NOTE,
                id="matrix-behaviour-note",
                className="small muted",
                hidden=behaviour_note_hidden(colour),
            ),
            components.graph_card("matrix-graph", "troupe-matrix"),
            components.section(
                "Cells",
                components.table("matrix-table"),
                note="Means over seeds; the interval is a Student-t 95% interval across "
                "seeds (none from fewer than 3 seeds). A cliff is a terminal drop below "
                "peak − θ, θ = max(half the gain, the drop evaluation noise could explain at "
                "α 0.05 over the run's evaluations); each run's threshold and test are in the "
                "compare view's table (docs/analysis.md).",
                actions=[
                    components.csv_button("matrix-csv", "Download CSV"),
                    dcc.Download(id="matrix-download"),
                ],
            ),
        ],
    )


# --- callbacks: plain functions, registered at the bottom --------------------------------------


def update_matrix(experiment_id, colour, _tick, metric=VOTER_AGREEMENT_KEY, at="final"):
    """Query → analysis → figure: (figure, cells table, status line, timer disabled). With
    `colour` "behaviour", the figure colours the cells by `metric`'s `at` value instead."""
    experiment = data.experiment(data.viewer(), state.parse_int(experiment_id))
    if experiment is None:
        message = "Choose an experiment." if experiment_id is None else "No such experiment."
        return figures.empty(message), [], [], True
    counts = data.experiment_status_counts(experiment)
    cells = cell_summaries(experiment, gradients=False)
    live = data.counts_live(counts)
    if colour == "behaviour":
        metric = state.parse_choice(metric, BEHAVIOURS, VOTER_AGREEMENT_KEY)
        at = state.parse_choice(at, AT, "final")
        figure = behaviour_matrix_figure(behaviour_cells(experiment, metric, at), metric, at)
    else:
        figure = figures.matrix_figure(cells, colour)
    return (
        figure,
        components.render_table(tables.CELL_COLUMNS, tables.cell_rows(cells)),
        components.status_line(counts, live, left_out_note(data.seeds_left_out(experiment))),
        not live,
    )


def behaviour_note_hidden(colour) -> bool:
    """The behaviour scale's explanation only where the cells are coloured by behaviour."""
    return colour != "behaviour"


def open_cell(click_data) -> str:
    """A click on a cell: the compare view of its runs."""
    points = (click_data or {}).get("points") or []
    run_ids = state.parse_ids(points[0].get("customdata")) if points else []
    if not run_ids:
        return dash.no_update
    return state.compare_url(run_ids, state.DEFAULT_KEY)


def download_cells(_clicks, experiment_id):
    experiment = data.experiment(data.viewer(), state.parse_int(experiment_id))
    if experiment is None:
        return dash.no_update
    rows = tables.cell_rows(cell_summaries(experiment, gradients=False))
    return {
        "content": tables.to_csv(rows, tables.CELL_CSV),
        "filename": f"troupe-experiment-{experiment.id}-cells.csv",
        "type": "text/csv",
    }


def view_hrefs(experiment_id) -> tuple[str, str]:
    """The header's links to the seed bands and the attribution view of the chosen
    experiment."""
    chosen = state.parse_int(experiment_id)
    return state.bands_url(chosen), state.attribution_url(chosen)


def sync_url(experiment_id, colour, metric=None, at=None) -> str:
    """Mirror the controls into the address bar (no reload), so the view can be shared."""
    behaviour = colour == "behaviour"
    return state.query(
        experiment=experiment_id,
        colour=None if colour == "gain" else colour,
        metric=metric if behaviour else None,
        at=at if behaviour and at != "final" else None,
    )


def image_format(fmt):
    """(config, figure patch): the camera button's format; see figures.image_format."""
    return figures.image_format(fmt, "troupe-matrix")


callback(
    Output("matrix-bands", "href"),
    Output("matrix-attribution", "href"),
    Input("matrix-experiment", "value"),
)(view_hrefs)
components.connect_experiment_options("matrix")
callback(
    Output("matrix-graph", "figure"),
    Output("matrix-table", "children"),
    Output("matrix-status", "children"),
    Output("matrix-tick", "disabled"),
    Input("matrix-experiment", "value"),
    Input("matrix-colour", "value"),
    Input("matrix-tick", "n_intervals"),
    Input("matrix-behaviour", "value"),
    Input("matrix-behaviour-at", "value"),
)(update_matrix)
callback(
    Output("matrix-go", "href"), Input("matrix-graph", "clickData"), prevent_initial_call=True
)(open_cell)
callback(
    Output("matrix-download", "data"),
    Input("matrix-csv", "n_clicks"),
    State("matrix-experiment", "value"),
    prevent_initial_call=True,
)(download_cells)
callback(
    Output("matrix-url", "search"),
    Input("matrix-experiment", "value"),
    Input("matrix-colour", "value"),
    Input("matrix-behaviour", "value"),
    Input("matrix-behaviour-at", "value"),
    prevent_initial_call=True,
)(sync_url)
callback(Output("matrix-behaviour-note", "hidden"), Input("matrix-colour", "value"))(
    behaviour_note_hidden
)
components.connect_format_switch("matrix", image_format)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/matrix", "name": "Matrix", "title": "Matrix · Troupe"}
