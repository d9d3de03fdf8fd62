"""The panel mounted at /dash/ in the real WSGI application (webapp.wsgi), behind Django's
login and CSRF checks, serving everything it needs itself."""

import json
import re
import subprocess
import sys

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client as DjangoClient
from werkzeug.test import Client

from tests.helpers import ROOT
from webapp.wsgi import application

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    """A WSGI client of the whole application (Django and the mounted panel).

    As Django's own test client does, it keeps the request signals from closing the database
    connection, which holds the test's transaction.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield Client(application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def signed_in(client, bob):
    """The client with the session cookie of bob, a signed-in teammate."""
    django_client = DjangoClient()
    django_client.force_login(bob)
    client.set_cookie("sessionid", django_client.cookies["sessionid"].value)
    return client


def options_callback(path="/dash/matrix") -> dict:
    """The body the Dash renderer posts to fill the matrix's experiment dropdown."""
    return {
        "output": "matrix-experiment.options",
        "outputs": {"id": "matrix-experiment", "property": "options"},
        "inputs": [{"id": "matrix-url", "property": "pathname", "value": path}],
        "changedPropIds": ["matrix-url.pathname"],
        "state": [],
    }


def test_an_anonymous_visitor_is_sent_to_the_login_page(client):
    response = client.get("/dash/matrix?experiment=5")

    assert response.status_code == 302
    assert response.headers["Location"] == "/accounts/login/?next=/dash/matrix%3Fexperiment%3D5"
    assert client.get("/dash/").headers["Location"] == "/accounts/login/?next=/dash/"


def test_an_anonymous_callback_is_refused(client):
    response = client.post("/dash/_dash-update-component", json=options_callback())
    assert response.status_code == 403


def test_django_still_serves_everything_else(client):
    assert client.get("/accounts/login/").status_code == 200
    assert client.get("/dashboard").status_code == 404  # /dash is a path segment, not a prefix


def test_a_signed_in_user_gets_the_panel_with_every_asset_served_locally(signed_in):
    response = signed_in.get("/dash/matrix?experiment=5")

    assert response.status_code == 200
    html = response.get_data(as_text=True)
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/dash/") for s in sources), sources
    config = json.loads(re.search(r'id="_dash-config"[^>]*>(.*?)</script>', html, re.S)[1])
    assert config["requests_pathname_prefix"] == "/dash/"
    assert config["csrf_token_name"] == "csrftoken"
    assert "panel.css" in html  # the stylesheet from webapp/dashboards/assets
    for source in sources:
        assert signed_in.get(source).status_code == 200, source
    layout = signed_in.get("/dash/_dash-layout")
    assert layout.status_code == 200 and "_pages_content" in layout.get_data(as_text=True)


def test_callbacks_need_the_csrf_token_the_page_load_set(signed_in):
    page = signed_in.get("/dash/")
    cookie = signed_in.get_cookie("csrftoken")
    assert cookie is not None, page.headers  # set on the first page load, for the renderer

    refused = signed_in.post("/dash/_dash-update-component", json=options_callback())
    assert refused.status_code == 403

    answered = signed_in.post(
        "/dash/_dash-update-component",
        json=options_callback(),
        headers={"X-CSRFToken": cookie.value},
    )
    assert answered.status_code == 200
    assert json.loads(answered.get_data())["response"]["matrix-experiment"]["options"] == []


def test_signing_out_ends_access_to_the_panel(signed_in):
    assert signed_in.get("/dash/").status_code == 200
    SessionStore(signed_in.get_cookie("sessionid").value).delete()
    assert signed_in.get("/dash/").status_code == 302


def test_the_panels_header_links_to_the_alerts_and_to_signing_out(signed_in):
    # The panel once had neither; signing out is a POST, so the panel links to a page
    # with the button, and that page's form signs out.
    layout = json.loads(signed_in.get("/dash/_dash-layout").get_data())

    def hrefs(node):
        if isinstance(node, dict):
            found = [node["props"]["href"]] if "href" in node.get("props", {}) else []
            return found + [h for child in node.values() for h in hrefs(child)]
        if isinstance(node, list):
            return [h for child in node for h in hrefs(child)]
        return []

    assert {"/alerts/", "/accounts/sign-out/"} <= set(hrefs(layout))
    page = signed_in.get("/accounts/sign-out/").get_data(as_text=True)
    assert 'id="sign-out-form"' in page and 'action="/accounts/logout/"' in page


def test_the_web_process_never_imports_torch():
    code = (
        "import sys, webapp.wsgi; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_panel_is_set_up_before_its_first_request():
    """Dash's lazy setup ran in the first requests' threads and raced (a page stuck at
    "Loading…", `DashRenderer is not defined`); the WSGI application does it as it is built."""
    code = (
        "import webapp.wsgi; from webapp.dashboards.app import app; "
        "print(sorted(app._got_first_request.items()), 'new DashRenderer' in app.renderer)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[('pages', True), ('setup_server', True)] True"
