"""Server errors in the JSON API: logged with their traceback (to stderr, settings.LOGGING)
and answered as JSON 500 — never Django's HTML page and never silently."""

import json
import subprocess
import sys

import pytest
from django.db import OperationalError
from django.test import Client, RequestFactory

from tests.helpers import ROOT, service_env
from tests.people import bearer
from webapp.api import views
from webapp.jsonapi.http import server_error

pytestmark = pytest.mark.django_db

POINTS = json.dumps({"points": [{"key": "a", "step": 1, "value": 1.0}]})


def failing_write(run_id, points):
    # What an overloaded database answered before batches were sorted: a fault to inject.
    raise OperationalError("deadlock detected")


def test_an_unexpected_error_is_a_json_500_and_is_logged(client, run, alice, monkeypatch, caplog):
    monkeypatch.setattr(views, "record_points", failing_write)

    response = client.post(
        f"/api/v1/runs/{run.id}/metrics",
        POINTS,
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()
    [record] = [r for r in caplog.records if r.name == "webapp.jsonapi.http"]
    assert f"POST /api/v1/runs/{run.id}/metrics" in record.getMessage()
    assert "deadlock detected" in str(record.exc_info[1])


def test_a_host_not_allowed_gets_a_json_400_under_the_api():
    response = Client().get("/api/v1/runs", headers={"host": "evil.example"})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "evil.example" in response.json()["error"]


def test_the_500_handler_answers_json_under_the_api_and_html_elsewhere():
    factory = RequestFactory()

    api = server_error(factory.get("/api/2.0/mlflow/runs/get"))
    page = server_error(factory.get("/experiments/"))

    assert api.status_code == page.status_code == 500
    assert api["Content-Type"] == "application/json"
    assert page["Content-Type"].startswith("text/html")


FAILING_SERVER = """
import django
django.setup()
from django.test import Client
from django.contrib.auth.models import User
from django.core.management import call_command
call_command("migrate", verbosity=0)
from webapp.api import views
def broken(*args):
    raise RuntimeError("probe-failure-7781")
views.read_series = broken
from webapp.experiments.models import ApiToken, Experiment, Run
user = User.objects.create(username="a")
run = Run.objects.create(experiment=Experiment.objects.create(owner=user, name="e"))
_, raw = ApiToken.issue(user)
client = Client(headers={"host": "127.0.0.1", "authorization": "Bearer " + raw})
response = client.get(f"/api/v1/runs/{run.id}/metrics")
print(response.status_code, response["Content-Type"])
"""


def test_the_traceback_reaches_stderr_with_the_default_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", FAILING_SERVER],
        cwd=ROOT,
        env=service_env(
            DATABASE_URL=None,
            TROUPE_DATA_DIR=str(tmp_path),
            DJANGO_SETTINGS_MODULE="webapp.settings",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.stdout.strip() == "500 application/json", result.stderr
    assert "Traceback" in result.stderr and "probe-failure-7781" in result.stderr


def _restarting(*args, **kwargs):
    # What psycopg raises through Django while PostgreSQL restarts: the server's "terminating
    # connection due to administrator command" (SQLSTATE 57P01). A fault to inject: a real
    # restart would take the database from everyone sharing it.
    import psycopg

    try:
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    except psycopg.Error as exc:
        raise OperationalError(str(exc)) from exc


def test_a_database_restart_is_a_retryable_503_not_a_500(client, run, alice, monkeypatch):
    # Once, during a PostgreSQL restart, GET /api/v1/runs/<id> answered 500.
    monkeypatch.setattr(views, "run_json", _restarting)

    response = client.get(f"/api/v1/runs/{run.id}", headers=bearer(alice))

    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert "cannot be reached" in response.json()["error"]
