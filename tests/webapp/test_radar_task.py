"""The live radar as a Celery task: a burst of writes queues one evaluation (the run's
`radar_due` mark), a write after it queues the next, and a real worker on the `radar` queue
brings the verdict while the run trains."""

import time

import pytest
from celery.signals import after_task_publish

from tests.helpers import database_url, service_env, start_worker
from tests.webapp.test_alerts import accuracy_points, rows, send
from webapp.alerts.radar import RADAR_QUEUE, evaluate_radar
from webapp.celery import app
from webapp.experiments.models import Run

# Committed transactions: an evaluation is queued when the write commits.
pytestmark = pytest.mark.django_db(transaction=True)

TASK = "webapp.experiments.alerts.evaluate_radar"


@pytest.fixture
def published():
    """The radar tasks this process sends to the broker, emptied from the queue afterwards."""
    sent: list[dict] = []

    def count(sender=None, headers=None, routing_key=None, **_):
        if sender == TASK:
            sent.append({"args": headers.get("argsrepr"), "queue": routing_key})

    after_task_publish.connect(count, weak=False)
    yield sent
    after_task_publish.disconnect(count)
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(RADAR_QUEUE)


def batches(n):
    """The accuracy curve cut into `n` batches, in step order."""
    points = accuracy_points()
    size = -(-len(points) // n)
    return [points[i : i + size] for i in range(0, len(points), size)]


def test_a_burst_of_writes_queues_one_evaluation(client, run, alice, published, settings):
    settings.TROUPE_RADAR_MIN_SECONDS = 30

    for batch in batches(6):
        assert send(client, alice, run, batch).status_code == 200

    assert published == [{"args": repr((run.id,)), "queue": RADAR_QUEUE}]
    assert Run.objects.get(id=run.id).radar_due is not None
    assert rows(run) == []  # judged by the queued task, not by the writes


def test_a_write_after_the_evaluation_queues_the_next(client, run, alice, published, settings):
    settings.TROUPE_RADAR_MIN_SECONDS = 30
    send(client, alice, run, accuracy_points(upto=70))

    evaluate_radar(run.id)  # what the worker runs when the window ends
    assert rows(run) == [("cliff", "", 50, 70, True)]
    assert Run.objects.get(id=run.id).radar_due is None

    send(client, alice, run, accuracy_points()[8:])
    assert len(published) == 2


def test_a_batch_the_radar_does_not_read_queues_nothing(client, run, alice, published):
    send(client, alice, run, [{"key": "train/kl", "step": 1, "value": 0.5}])

    assert published == []
    assert Run.objects.get(id=run.id).radar_due is None


def test_a_mark_whose_message_was_lost_is_queued_again(client, run, alice, published, settings):
    settings.TROUPE_RADAR_MIN_SECONDS = 30
    send(client, alice, run, accuracy_points(upto=20))
    lost = Run.objects.get(id=run.id).radar_due.replace(year=2000)  # its task never ran
    Run.objects.filter(id=run.id).update(radar_due=lost)

    send(client, alice, run, accuracy_points()[6:])

    assert len(published) == 2


@pytest.mark.timeout(240)
def test_the_verdict_arrives_through_a_real_worker(client, run, alice, settings):
    settings.TROUPE_RADAR_MIN_SECONDS = 3
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    with start_worker(env, queues=RADAR_QUEUE, pool="solo") as worker:
        for batch in batches(4):  # a burst: well within the 3 s window
            send(client, alice, run, batch)
        assert rows(run) == []  # nothing judged in the write path

        deadline = time.monotonic() + 120
        while rows(run) != [("cliff", "", 50, 90, False)] and time.monotonic() < deadline:
            worker.assert_running()
            time.sleep(0.2)
        log = worker.log.read_text(errors="replace")

    assert rows(run) == [("cliff", "", 50, 90, False)], log[-3000:]
    assert log.count(f"Task {TASK}[") == 2, log[-3000:]  # received, succeeded: one task
    assert Run.objects.get(id=run.id).radar_due is None
