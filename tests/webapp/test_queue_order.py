"""Runs start in the order they were queued: the embedded filesystem broker hands messages
out by file name, which starts with the millisecond it was written, so messages sent within
one millisecond used to come out in random (uuid) order."""

import json
from base64 import b64decode

import pytest
from celery import Celery

import webapp.celery
from tests.people import make_experiment
from webapp.runs.queueing import send_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def filesystem_broker(tmp_path, monkeypatch):
    folder = tmp_path / "queue"
    folder.mkdir()
    monkeypatch.delenv("CELERY_BROKER_URL")  # Celery prefers it to the app's own broker
    app = Celery("troupe-test", broker="filesystem://localhost/")
    app.conf.broker_transport_options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
    }
    app.conf.task_queues = webapp.celery.app.conf.task_queues
    monkeypatch.setattr(webapp.celery, "app", app)
    return folder


def _taken_in_order(folder) -> list[int]:
    """The run ids in the order the filesystem transport hands the messages out."""
    ids = []
    for path in sorted(p.name for p in folder.iterdir()):
        body = json.loads((folder / path).read_text())["body"]
        ids.append(json.loads(b64decode(body))[0][0])
    return ids


def test_runs_queued_together_are_handed_out_in_queue_order(filesystem_broker, alice):
    runs = list(make_experiment(alice, runs=40).runs.order_by("id"))

    send_runs(runs)

    assert _taken_in_order(filesystem_broker) == [run.id for run in runs]
