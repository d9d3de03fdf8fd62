"""TROUPE_ALERT_WEBHOOK_URL: each confirmed alert is POSTed once, to a real HTTP server on
127.0.0.1, after the write commits; a webhook that fails never fails the write. And
TROUPE_RADAR_MIN_SECONDS: batches within the window wait for one trailing evaluation."""

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from tests.helpers import ROOT, database_url, free_port, service_env
from tests.webapp.test_alerts import accuracy_points, every_batch, rows, send  # noqa: F401
from webapp.experiments.alerts import send_webhook
from webapp.experiments.models import Alert

# Committed transactions: the webhook is sent on commit, which a test transaction never does.
pytestmark = pytest.mark.django_db(transaction=True)


class Receiver(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", Receiver.received
    server.shutdown()
    server.server_close()


def wait_for(received, n, seconds=10.0):
    deadline = time.monotonic() + seconds
    while len(received) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return received


def test_a_confirmed_alert_is_posted_once(client, run, alice, receiver, settings):
    url, received = receiver
    settings.TROUPE_ALERT_WEBHOOK_URL = url

    send(client, alice, run, accuracy_points(upto=70))  # provisional: nothing to send yet
    send(client, alice, run, accuracy_points())  # confirmed
    wait_for(received, 1)
    send(client, alice, run, accuracy_points())  # again: already sent

    time.sleep(0.5)  # time for a second POST, were one ever started
    assert len(received) == 1
    content_type, payload = received[0]
    assert content_type == "application/json"
    assert payload["event"] == "troupe.alert"
    assert payload["alert"]["kind"] == "cliff" and payload["alert"]["step"] == 50
    assert payload["alert"]["provisional"] is False
    assert payload["run"]["id"] == run.id
    assert payload["experiment"]["name"] == run.experiment.name
    assert payload["text"] == f"Run {run.id}: cliff at step 50 (confirmed at step 90)"
    assert Alert.objects.get(run=run).notified is not None


def test_a_webhook_that_refuses_leaves_the_write_alone(client, run, alice, settings):
    settings.TROUPE_ALERT_WEBHOOK_URL = f"http://127.0.0.1:{free_port()}/nobody-listens"

    response = send(client, alice, run, accuracy_points())

    assert response.status_code == 200
    assert Alert.objects.filter(run=run, provisional=False).count() == 1
    assert run.points.count() == len(accuracy_points())


def test_send_webhook_logs_a_failure_and_returns_false(caplog):
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"

    assert send_webhook(url, {"event": "troupe.alert"}) is False
    assert "alert webhook" in caplog.text


def test_no_webhook_is_sent_without_a_url(client, run, alice, receiver):
    _, received = receiver

    send(client, alice, run, accuracy_points())

    time.sleep(0.3)
    assert received == []


def test_batches_within_the_window_are_judged_once_at_its_end(client, run, alice, settings):
    settings.TROUPE_RADAR_MIN_SECONDS = 3
    send(client, alice, run, accuracy_points(upto=70))
    assert rows(run) == [("cliff", "", 50, 70, True)]  # the first batch: judged at once

    send(client, alice, run, accuracy_points()[8:])  # within 3 s: waits for the window's end
    assert rows(run) == [("cliff", "", 50, 70, True)]

    deadline = time.monotonic() + 15
    while rows(run)[0][-1] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rows(run) == [("cliff", "", 50, 90, False)]


def test_a_process_that_ends_after_its_last_batch_still_has_it_judged(run):
    # Two batches within the window from a short-lived process (an import, a worker's last
    # flush): the trailing evaluation runs before the process exits.
    script = (
        "from webapp.metrics import write_points\n"
        "from tests.webapp.test_alerts import accuracy_points\n"
        "points = [(p['key'], p['step'], p['value']) for p in accuracy_points()]\n"
        f"write_points({run.id}, points[:8])\n"
        f"write_points({run.id}, points[8:])\n"
    )
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]), TROUPE_RADAR_MIN_SECONDS="3"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert rows(run) == [("cliff", "", 50, 90, False)]
