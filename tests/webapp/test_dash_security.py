"""The panel treats names users chose as text, and its responses carry Django's security
headers.

- A run, model, role or metric name holding HTML (anyone may create external runs and log
  metric keys through the API) reaches every figure escaped: plotly renders a subset of HTML
  in legends, hover boxes, ticks and annotations, so `<a href>` would be a live link and
  `<span style>` would restyle the panel.
- Every /dash/ response — page, callback, asset, redirect — carries X-Frame-Options,
  X-Content-Type-Options and the other headers Django's own pages get.
"""

import json

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client as DjangoClient
from werkzeug.test import Client

from tests.people import bearer
from webapp.dashboards import data
from webapp.dashboards.pages import compare, gradients, matrix
from webapp.runs.summaries import clear_cache
from webapp.wsgi import application

pytestmark = pytest.mark.django_db

LINK = '<a href="https://evil.example/">click me</a>'
STYLED = '<span style="font-size:80px">big</span>'
ROLE = '<span style="font-size:80px">big'  # no "/": a role is one segment of its metric key
SECURITY_HEADERS = (
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
)


@pytest.fixture
def hostile_run(client, experiment, alice):
    """An external run whose name, model and role names hold HTML, logged through the API."""
    body = {
        "name": f"{LINK} {STYLED}",
        "experiment": experiment.id,
        "config": {"model": "<b>m</b>", "workflow": "voting", "task": "math", "sharing": "shared"},
    }
    created = client.post(
        "/api/v1/runs", json.dumps(body), content_type="application/json", headers=bearer(alice)
    )
    assert created.status_code == 201
    run_id = created.json()["id"]
    points = [
        {"key": key, "step": step, "value": value}
        for step in range(0, 40, 10)
        for key, value in (
            ("eval/accuracy", 0.5),
            ("train/reward", 0.4),
            (f"role/{ROLE}/grad_norm", 1.0 + step),
            (f"role/{ROLE}/grad_share", 0.5),
            ("role/generator/grad_norm", 2.0),
            ("role/generator/grad_share", 0.5),
            (f"grad_cos/{LINK}|generator", 0.1),
        )
    ]
    written = client.post(
        f"/api/v1/runs/{run_id}/metrics",
        json.dumps({"points": points}),
        content_type="application/json",
        headers=bearer(alice),
    )
    assert written.status_code == 200
    clear_cache()
    yield run_id
    clear_cache()


def figure_texts(figure) -> list[str]:
    """Every string of the figure plotly may render as HTML."""
    texts = []
    for trace in figure.data:
        for name in ("name", "hovertemplate", "hovertext", "text", "x", "y"):
            value = getattr(trace, name, None)
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, list | tuple):
                rows = [row if isinstance(row, list | tuple) else [row] for row in value]
                texts += [v for row in rows for v in row if isinstance(v, str)]
    texts += [a.text for a in figure.layout.annotations if a.text]
    layout = figure.to_plotly_json()["layout"]
    for axis in (k for k in layout if k.startswith(("xaxis", "yaxis"))):
        texts.append(((layout[axis].get("title") or {}).get("text")) or "")
    return texts


def assert_shown_as_text(figure):
    texts = figure_texts(figure)
    joined = "\n".join(texts)
    assert "<a" not in joined and '<span style="font' not in joined, joined
    assert "&lt;" in joined  # the names are there, escaped


def test_a_run_name_with_html_is_escaped_in_the_curves(hostile_run, bob):
    with data.viewing_as(bob):
        figure = compare.update_compare([hostile_run], "eval/accuracy", "0", "sharing", 0)[0]

    assert_shown_as_text(figure)
    [line] = [t for t in figure.data if t.mode == "lines+markers"]
    assert line.name == (
        f'run {hostile_run} · &lt;a href="https://evil.example/"&gt;click me&lt;/a&gt; '
        '&lt;span style="font-size:80px"&gt;big&lt;/span&gt;'
    )


def test_a_metric_key_with_html_is_escaped_in_the_axis_title(hostile_run, bob):
    with data.viewing_as(bob):
        key = f"role/{ROLE}/grad_norm"
        figure = compare.update_compare([hostile_run], key, "0", "sharing", 0)[0]

    assert_shown_as_text(figure)


def test_role_and_pair_names_with_html_are_escaped_in_the_gradient_dynamics(hostile_run, bob):
    with data.viewing_as(bob):
        figure = gradients.update_gradients([hostile_run], 0)[0]

    assert_shown_as_text(figure)
    role = '&lt;span style="font-size:80px"&gt;big'
    assert any(t.name == role for t in figure.data)


def test_a_model_name_with_html_is_escaped_in_the_matrix(hostile_run, experiment, bob):
    with data.viewing_as(bob):
        figure = matrix.update_matrix(experiment.id, "gain", 0)[0]

    texts = figure_texts(figure)
    assert "&lt;b&gt;m&lt;/b&gt;" in texts and "<b>m</b>" not in "\n".join(texts)


def test_a_percent_brace_in_a_name_is_not_a_hover_template_variable(client, experiment, alice, bob):
    body = {"name": "%{y} %{x}", "experiment": experiment.id}
    run_id = client.post(
        "/api/v1/runs", json.dumps(body), content_type="application/json", headers=bearer(alice)
    ).json()["id"]
    points = [{"key": "train/reward", "step": 1, "value": 0.5}]
    client.post(
        f"/api/v1/runs/{run_id}/metrics",
        json.dumps({"points": points}),
        content_type="application/json",
        headers=bearer(alice),
    )
    clear_cache()
    with data.viewing_as(bob):
        figure = compare.update_compare([run_id], "train/reward", "0", "sharing", 0)[0]

    # One point: a dot on its line (a line through one point draws nothing).
    [line] = [t for t in figure.data if t.mode == "lines+markers"]
    shown = "%&#123;y} %&#123;x}<br>step %{x}"
    assert line.hovertemplate.startswith(f"run {run_id} · {shown}")


# --- headers -------------------------------------------------------------------------------


@pytest.fixture
def wsgi():
    """A WSGI client of the whole application (Django and the mounted panel); as Django's test
    client does, it keeps the request signals from closing the test's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield Client(application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def django_page_headers(wsgi) -> dict[str, str]:
    response = wsgi.get("/accounts/login/")
    assert response.status_code == 200
    return {name: response.headers.get(name) for name in SECURITY_HEADERS}


def test_the_panel_sends_the_headers_django_pages_send(wsgi, bob):
    expected = django_page_headers(wsgi)
    assert expected["X-Frame-Options"] == "DENY"
    assert expected["X-Content-Type-Options"] == "nosniff"
    signed = DjangoClient()
    signed.force_login(bob)
    wsgi.set_cookie("sessionid", signed.cookies["sessionid"].value)

    page = wsgi.get("/dash/")
    asset = wsgi.get("/dash/_dash-layout")
    refused_callback = wsgi.post("/dash/_dash-update-component", json={})  # no CSRF token

    for response in (page, asset, refused_callback):
        got = {name: response.headers.get(name) for name in SECURITY_HEADERS}
        assert got == expected, (response.status_code, dict(response.headers))
    assert (page.status_code, asset.status_code, refused_callback.status_code) == (200, 200, 403)
    assert len(page.headers.getlist("X-Frame-Options")) == 1


def test_the_login_redirect_of_the_panel_carries_them_too(wsgi):
    expected = django_page_headers(wsgi)

    response = wsgi.get("/dash/matrix")

    assert response.status_code == 302
    assert {name: response.headers.get(name) for name in SECURITY_HEADERS} == expected
