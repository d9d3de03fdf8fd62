"""Layout pieces every page of the panel uses: header, labelled controls, the experiment and
runs pickers, the image-format switch and its callback, the graph card, the live-refresh
timer, the status line, tables, CSV buttons and the links between views.

Styling lives in `assets/panel.css`. Tables are plain HTML (`render_table`), not
dash_table.DataTable, which Dash 4 deprecates; a page that sorts its table (seed bands) gets
heading buttons and sorts on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dash import Input, Output, callback, dcc, html

from webapp.dashboards import data, figures, labels, state, tables

REFRESH_MS = 5000  # live views poll at most every 5 s, and only while a run is unfinished

_STATUS_ORDER = ("running", "queued", "succeeded", "failed", "cancelled")


def header(title: str, lede: str, *links) -> html.Div:
    return html.Div(
        className="panel-head",
        children=[
            html.Div([html.H1(title), html.P(lede, className="lede")]),
            html.Div(list(links), className="panel-links"),
        ],
    )


def control(label: str, component, width: str | None = None) -> html.Div:
    return html.Div(
        className="control",
        style={"flex": f"0 1 {width}"} if width else None,
        children=[html.Label(label, className="control-label"), component],
    )


def placeholder_options(values, label: str) -> list[dict]:
    """Options holding the URL's values until a callback brings the real labels: a dropdown
    drops a value that is not among its options. `label` is a format string, e.g. 'run {}'."""
    return [{"label": label.format(v), "value": v} for v in values]


def radio(id_: str, choices: dict[str, str], value: str) -> dcc.RadioItems:
    """One of `choices` (value → label), inline."""
    options = [{"label": label, "value": key} for key, label in choices.items()]
    return dcc.RadioItems(id=id_, options=options, value=value, inline=True, className="radio")


def format_switch(id_: str) -> dcc.RadioItems:
    """PNG or SVG for the camera button of the page's figures."""
    return radio(id_, {"png": "PNG", "svg": "SVG"}, "png")


def connect_format_switch(page: str, image_format: Callable) -> None:
    """Register the page's format switch (`<page>-format`) to re-configure `<page>-graph`;
    `image_format(fmt)` returns (config, figure patch), see figures.image_format."""
    callback(
        Output(f"{page}-graph", "config"),
        Output(f"{page}-graph", "figure", allow_duplicate=True),
        Input(f"{page}-format", "value"),
        prevent_initial_call=True,
    )(image_format)


def graph_card(id_: str, filename: str) -> html.Div:
    """The page's figure, "Loading…" until its callback draws it."""
    graph = dcc.Graph(
        id=id_, figure=figures.empty("Loading…"), config=figures.graph_config("png", filename)
    )
    return html.Div(graph, className="card graph-card")


def experiment_control(page: str, experiment_id: int | None) -> html.Div:
    """The experiment picker (`<page>-experiment`); `connect_experiment_options` fills in
    every experiment's label."""
    dropdown = dcc.Dropdown(
        id=f"{page}-experiment",
        value=experiment_id,
        clearable=False,
        placeholder="Choose an experiment",
        options=placeholder_options([experiment_id] if experiment_id else [], "Experiment #{}"),
    )
    return control("Experiment", dropdown, width="28rem")


def experiment_options(_pathname) -> list[dict]:
    """Every experiment, for the picker (anyone signed in may read them all)."""
    return [
        {"label": labels.experiment_label(e), "value": e.id}
        for e in data.experiments(data.viewer())
    ]


def connect_experiment_options(page: str) -> None:
    """Register the page's experiment picker to be filled when the page (`<page>-url`) loads."""
    callback(Output(f"{page}-experiment", "options"), Input(f"{page}-url", "pathname"))(
        experiment_options
    )


def runs_control(id_: str, run_ids: list[int], width: str) -> html.Div:
    """The runs picker; `run_options` fills in the labels and the other runs to add."""
    dropdown = dcc.Dropdown(
        id=id_,
        value=run_ids,
        multi=True,
        placeholder="Choose runs",
        options=placeholder_options(run_ids, "run {}"),
    )
    return control("Runs", dropdown, width=width)


def run_options(run_ids) -> list[dict]:
    """The selected runs and every other run of their experiments."""
    chosen = data.runs(data.viewer(), state.parse_ids(run_ids))
    return [{"label": labels.run_label(r), "value": r.id} for r in data.sibling_runs(chosen)]


def drawn_note(drawn: Sequence, runs: Sequence) -> str:
    """What the status line says when the figure leaves runs out (the table never does)."""
    if len(runs) > len(drawn):
        return f"figure shows the first {len(drawn)} runs; the table lists all {len(runs)}"
    return ""


def view_links(runs: Sequence, text: str, href: str, primary: bool = False) -> list:
    """A link to another view of the same runs, led by "← Matrix" when they are all of one
    experiment."""
    if not runs:
        return []
    links = [html.A(text, href=href, className="button" if primary else "button secondary")]
    experiments = sorted({r.experiment_id for r in runs})
    if len(experiments) == 1:
        matrix = state.matrix_url(experiments[0])
        links.insert(0, html.A("← Matrix", href=matrix, className="button secondary"))
    return links


def bands_link(runs: Sequence) -> list:
    """A link to the seed bands of these runs (none for no runs)."""
    if not runs:
        return []
    href = state.bands_url(run_ids=[r.id for r in runs])
    return [html.A("Seed bands →", href=href, className="button secondary")]


def live_timer(id_: str) -> dcc.Interval:
    """Starts disabled; the page's main callback enables it while a run is unfinished."""
    return dcc.Interval(id=id_, interval=REFRESH_MS, disabled=True)


def status_line(counts: dict[str, int], live: bool, extra: str = "") -> list:
    """'72 runs: 70 succeeded, 2 running · refreshing every 5 s' as badges."""
    total = sum(counts.values())
    parts: list = [html.Span(f"{total} run{'s' if total != 1 else ''}", className="count")]
    for status in sorted(counts, key=lambda s: (_STATUS_ORDER + (s,)).index(s)):
        parts.append(html.Span(f"{counts[status]} {status}", className=f"badge status-{status}"))
    if live:
        parts.append(
            html.Span(f"live: refreshing every {REFRESH_MS // 1000} s", className="badge live")
        )
    if extra:
        parts.append(html.Span(extra, className="muted"))
    return parts


def run_status(asked: Sequence[int], runs: Sequence, live: bool, extra: str = "") -> list:
    """`status_line` of the runs a page was asked for, naming the ids that are no run a
    signed-in user can see (unknown, or deleted): they were once dropped without a word, and
    `?runs=99999` read as if no run had been chosen."""
    found = {run.id for run in runs}
    missing = [str(i) for i in asked if i not in found]
    note = f"no run {', '.join(missing)} (unknown or deleted)" if missing else ""
    if not runs:
        return [html.Span(note, className="error")] if note else []
    return status_line(data.status_counts(runs), live, " · ".join(t for t in (extra, note) if t))


def table(id_: str) -> html.Div:
    """Where a page's callback puts a rendered table (`render_table`)."""
    return html.Div(id=id_, className="table-wrap")


def render_table(
    columns: list[tables.Column],
    rows: list[dict],
    sort_id: str | None = None,
    sort: dict | None = None,
) -> html.Table | html.P:
    """A plain HTML table of `rows` (a list of dicts) in `columns`; links for "link" cells.
    With `sort_id`, each heading is a button `{"type": sort_id, "col": column id}` that a
    page's callback turns into an order; `sort` ({"col", "desc"}) marks the current one."""
    if not rows:
        return html.P("Nothing to show yet.", className="note")
    head = html.Thead(
        html.Tr(
            [
                html.Th(
                    _sort_button(c, sort_id, sort or {}) if sort_id else c.name,
                    className=_head_class(c),
                    **({"aria-sort": _aria_sort(c, sort or {})} if sort_id else {}),
                )
                for c in columns
            ]
        )
    )
    body = html.Tbody(
        [
            html.Tr(
                [
                    # `<column>_title` in a row is that cell's hover text (a verdict's evidence).
                    html.Td(
                        _cell(c, row),
                        className=tables.cell_class(c, row),
                        **({"title": row[f"{c.id}_title"]} if row.get(f"{c.id}_title") else {}),
                    )
                    for c in columns
                ]
            )
            for row in rows
        ]
    )
    return html.Table([head, body], className="data")


def _sort_button(column: tables.Column, sort_id: str, sort: dict) -> html.Button:
    arrow = ""
    if sort.get("col") == column.id:
        arrow = " ▼" if sort.get("desc") else " ▲"
    return html.Button(
        column.name + arrow,
        id={"type": sort_id, "col": column.id},
        n_clicks=0,
        className="sort",
        title=f"Sort by {column.name}",
    )


def _aria_sort(column: tables.Column, sort: dict) -> str:
    if sort.get("col") != column.id:
        return "none"
    return "descending" if sort.get("desc") else "ascending"


def _head_class(column: tables.Column) -> str:
    return "" if column.kind in ("text", "link") else "number"


def _cell(column: tables.Column, row: dict):
    value = row.get(column.id)
    if column.kind == "link" and value:
        text, href = value
        return html.A(text, href=href)
    return tables.show(value, column.kind)


def csv_button(id_: str, label: str) -> html.Button:
    return html.Button(label, id=id_, n_clicks=0, className="button secondary")


def csv_actions(page: str) -> list:
    """The two downloads of a runs view: its table and the series it plots."""
    return [
        csv_button(f"{page}-csv", "Table CSV"),
        csv_button(f"{page}-series-csv", "Plotted series CSV"),
        dcc.Download(id=f"{page}-download"),
        dcc.Download(id=f"{page}-series-download"),
    ]


def section(title: str, *children, note: str | None = None, actions=None) -> html.Section:
    head = [html.H2(title)]
    if actions:
        head.append(html.Div(actions, className="section-actions"))
    body = [html.Div(head, className="section-head")]
    if note:
        body.append(html.P(note, className="note"))
    return html.Section(body + list(children), className="card")
