"""Layout pieces every page of the panel uses: header, labelled controls, the image-format
switch, the live-refresh timer, the status line, tables and CSV buttons.

Styling lives in `assets/panel.css`. Tables are plain HTML (`render_table`), not
dash_table.DataTable, which Dash 4 deprecates; sorting is left to the CSV.
"""

from __future__ import annotations

from dash import dcc, html

from webapp.dashboards import tables

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


def format_switch(id_: str) -> dcc.RadioItems:
    """PNG or SVG for the camera button of the page's figures."""
    return dcc.RadioItems(
        id=id_,
        options=[{"label": "PNG", "value": "png"}, {"label": "SVG", "value": "svg"}],
        value="png",
        inline=True,
        className="radio",
    )


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


def table(id_: str) -> html.Div:
    """Where a page's callback puts a rendered table (`render_table`)."""
    return html.Div(id=id_, className="table-wrap")


def render_table(columns: list[tables.Column], rows: list[dict]) -> html.Table | html.P:
    """A plain HTML table of `rows` (a list of dicts) in `columns`; links for "link" cells."""
    if not rows:
        return html.P("Nothing to show yet.", className="note")
    head = html.Thead(html.Tr([html.Th(c.name, className=_head_class(c)) for c in columns]))
    body = html.Tbody(
        [
            html.Tr([html.Td(_cell(c, row), className=tables.cell_class(c, row)) for c in columns])
            for row in rows
        ]
    )
    return html.Table([head, body], className="data")


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


def section(title: str, *children, note: str | None = None, actions=None) -> html.Section:
    head = [html.H2(title)]
    if actions:
        head.append(html.Div(actions, className="section-actions"))
    body = [html.Div(head, className="section-head")]
    if note:
        body.append(html.P(note, className="note"))
    return html.Section(body + list(children), className="card")
