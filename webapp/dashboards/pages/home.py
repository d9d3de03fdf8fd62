"""The panel's front page, /dash/: what each view shows, and the viewer's experiments with
a link to each one's matrix."""

from __future__ import annotations

from dash import Input, Output, callback, dcc, html

from webapp.dashboards import components, data, state

VIEWS = [
    (
        "Matrix",
        "gains, peaks and cliffs of every workflow × task × model cell, one grid per "
        "sharing mode; click a cell to compare its runs.",
    ),
    ("Compare", "any metric of chosen runs overlaid, with each run's peak and cliff onset."),
    (
        "Seed bands",
        "runs grouped by any config field, each group's mean with a 95% interval or min … max "
        "band; a run table sortable by config, peak, final and cliff.",
    ),
    (
        "Gradient dynamics",
        "per-role gradient norms, shares and cosines, and whether a role's "
        "gradient amplified before the cliff or captured a shared policy.",
    ),
    (
        "Attribution",
        "which role carries each cell's gain (Shapley shares from role swaps, with their "
        "intervals) beside which role took the gradient.",
    ),
]


def layout(**_ignored) -> html.Div:
    return html.Div(
        className="panel-page",
        children=[
            dcc.Location(id="home-url", refresh=False),
            components.live_timer("home-tick"),
            components.header(
                "Panel",
                "Compare runs of an experiment: start from its matrix. Every view's address "
                "holds its state, so you can bookmark it or send it to a colleague.",
            ),
            html.Ul(
                [html.Li([html.Strong(name + ": "), text]) for name, text in VIEWS],
                className="views",
            ),
            components.section("Experiments", html.Div(id="home-experiments")),
        ],
    )


def list_experiments(_pathname, _tick):
    """(the experiments table, timer disabled): refreshes while any run is unfinished."""
    found = data.experiments(data.viewer())
    if not found:
        return html.P(
            "No experiments yet. Design one on the Experiments page, or load the demo with "
            "`python manage.py load_demo_experiment`.",
            className="note",
        ), True
    head = html.Tr(
        [html.Th(h) for h in ("Experiment", "Owner", "Created", "Runs", "Unfinished", "")]
    )
    rows = [
        html.Tr(
            [
                html.Td([html.Strong(e.name), html.Span(f" #{e.id}", className="muted")]),
                html.Td(e.owner.get_username()),
                html.Td(e.created.strftime("%Y-%m-%d %H:%M")),
                html.Td(e.n_runs),
                html.Td(e.n_live or "—"),
                html.Td(
                    [
                        html.A("Matrix →", href=state.matrix_url(e.id)),
                        " ",
                        html.A(
                            "Attribution →",
                            href=state.attribution_url(e.id),
                            className="attribution-link",
                        ),
                    ]
                ),
            ]
        )
        for e in found
    ]
    live = any(e.n_live for e in found)
    return html.Table([html.Thead(head), html.Tbody(rows)], className="list"), not live


callback(
    Output("home-experiments", "children"),
    Output("home-tick", "disabled"),
    Input("home-url", "pathname"),
    Input("home-tick", "n_intervals"),
)(list_experiments)

# Registered by app.py, which imports the pages (a page never imports the app).
PAGE = {"path": "/", "name": "Panel", "title": "Panel · Troupe"}
