"""The attribution view, /dash/attribution?experiment=5: across the matrix, which role carries
each cell's gain (its share of the change by Shapley attribution, from the runs' "Attribute
this run's gain" jobs) beside which role took the gradient (its share of the roles' summed
gradient norm), so a researcher sees whether the role that took most of the gradient is the
one that delivered the gain. Query → rows: `webapp/attribution/matrix.py`; the figure here.
"""

from __future__ import annotations

import plotly.graph_objects as go
from dash import Input, Output, callback, dcc, html
from plotly.subplots import make_subplots

from vocabulary.names import CELL_AXES
from webapp.attribution.matrix import attribution_cells
from webapp.dashboards import components, data, figures, labels, state, tables

COLUMNS = [
    tables.Column("cell", "Cell"),
    tables.Column("sharing_name", "Sharing"),
    tables.Column("role", "Role"),
    tables.Column("fraction_text", "Share of the gain [95% interval]"),
    tables.Column("share", "Shapley value", "signed"),
    tables.Column("gradient", "Share of the gradient", "pct"),
    tables.Column("attributed_text", "Runs attributed"),
]
NOTE = (
    "Share of the gain: each role's Shapley value divided by the change (final − base), mean "
    "over the cell's attributed runs, with its 95% interval (one run: its paired bootstrap "
    "over problems; several: the span of theirs); an interval that crosses 0 is no evidence "
    "the role carried any of it. Queue an attribution from a run's page. Share of the "
    "gradient: the role's gradient norm over the roles' sum, mean over logged steps (under a "
    'shared policy, its grad_share). docs/analysis.md, "Attribution", says what the shares '
    "assume."
)


def layout(experiment=None, **_ignored) -> html.Div:
    experiment_id = state.parse_int(experiment)
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="attribution-url", refresh=False),
            components.header(
                "Which role carries the gain",
                "Per cell and role: its share of the gain, from Shapley attribution over "
                "role swaps, beside its share of the gradient.",
                html.A(
                    "Matrix →", href=state.matrix_url(experiment_id), className="button secondary"
                ),
            ),
            html.Div(
                className="controls",
                children=[components.experiment_control("attribution", experiment_id)],
            ),
            components.graph_card("attribution-graph", "troupe-attribution"),
            components.section("Cells and roles", components.table("attribution-table"), note=NOTE),
        ],
    )


def _cell_name(row: dict) -> str:
    return labels.cell_label(row["workflow"], row["task"], row["model"])


def attribution_figure(rows: list[dict]) -> go.Figure:
    """Two panels, one bar per (cell × sharing, role): share of the gain, share of the
    gradient."""
    if not rows:
        return figures.empty("This experiment has no runs yet.")
    if not any(r["fraction"] is not None for r in rows):
        return figures.empty("No run of this experiment has an attribution yet.")
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        subplot_titles=("share of the gain", "share of the gradient"),
    )
    roles = list(dict.fromkeys(r["role"] for r in rows))
    for role in roles:
        mine = [r for r in rows if r["role"] == role]
        y = [f"{_cell_name(r)}<br>{labels.sharing_name(r['sharing'])}" for r in mine]
        colour = figures.role_colour(role)
        for col, field in ((1, "fraction"), (2, "gradient")):
            fig.add_trace(
                go.Bar(
                    x=[r[field] for r in mine],
                    error_x=_error_bars(mine) if field == "fraction" else None,
                    y=y,
                    orientation="h",
                    name=role,
                    legendgroup=role,
                    showlegend=col == 1,
                    marker_color=colour,
                    hovertemplate=f"{role}: %{{x:.0%}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    cells = len({tuple(r[axis] for axis in CELL_AXES) for r in rows})
    fig.update_xaxes(tickformat=".0%")
    return figures.styled(fig, barmode="group", height=160 + 70 * cells)


def fraction_text(row: dict) -> str:
    """ "7% [−20%, 34%] crosses 0", "93% [61%, 120%]", or "—" with no attribution."""
    if row["fraction"] is None:
        return "—"
    low, high = row.get("fraction_low"), row.get("fraction_high")
    if low is None:
        return f"{row['fraction']:.0%}"
    text = f"{row['fraction']:.0%} [{low:.0%}, {high:.0%}]".replace("-", "−")
    return text + (" crosses 0" if low < 0 < high else "")


def _error_bars(rows: list[dict]) -> dict:
    """The share of the gain's interval as error bars (none where a cell has none)."""
    plus = [_gap(r.get("fraction_high"), r["fraction"]) for r in rows]
    minus = [_gap(r["fraction"], r.get("fraction_low")) for r in rows]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def _gap(a, b):
    return None if a is None or b is None else a - b


def table_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            **row,
            "fraction_text": fraction_text(row),
            "cell": _cell_name(row),
            "sharing_name": labels.sharing_name(row["sharing"]),
            "attributed_text": f"{row['attributed']} of {row['runs']}",
        }
        for row in rows
    ]


def update(experiment_id):
    """Query → rows → figure: (figure, table)."""
    experiment = data.experiment(data.viewer(), state.parse_int(experiment_id))
    if experiment is None:
        message = "Choose an experiment." if experiment_id is None else "No such experiment."
        return figures.empty(message), []
    rows = attribution_cells(data.experiment_seeds(experiment))
    return attribution_figure(rows), components.render_table(COLUMNS, table_rows(rows))


def sync_url(experiment_id) -> str:
    return state.query(experiment=experiment_id)


components.connect_experiment_options("attribution")
callback(
    Output("attribution-graph", "figure"),
    Output("attribution-table", "children"),
    Input("attribution-experiment", "value"),
)(update)
callback(
    Output("attribution-url", "search"),
    Input("attribution-experiment", "value"),
    prevent_initial_call=True,
)(sync_url)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/attribution", "name": "Attribution", "title": "Attribution · Troupe"}
