"""TROUPE_ALERT_WEBHOOK_URL: each confirmed alert is POSTed once, to a real HTTP server on
127.0.0.1, after the write commits; a webhook that fails never fails the write."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import free_port
from tests.webapp.test_alerts import accuracy_points, every_batch, rows, send  # noqa: F401
from webapp.alerts.radar import send_webhook
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
