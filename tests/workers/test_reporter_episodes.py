"""Episodes through the database reporter: stored with the step's points, once however often
they are sent, and kept while the database does not answer."""

import pytest
from django.db import connection

from tests.runs import require_postgres
from tests.webapp.test_api_episodes import record
from webapp.episodes.models import Episode
from webapp.experiments.models import Run
from workers.execute import claim
from workers.reporter import DatabaseReporter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(run) -> Run:
    return claim(run.id, worker="cpu@here", task_id="t")


def slots(run) -> list[tuple]:
    return sorted(Episode.objects.filter(run=run).values_list("kind", "step", "index"))


def test_episodes_are_stored_with_the_next_flush_and_once_when_sent_again(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)
    reporter.log_episodes(1, [record("train", 1, 0), record("train", 1, 1)])
    assert slots(held) == []  # buffered: the step's points are not due yet
    reporter.log(1, {"train/reward": 0.5})
    assert reporter.flush()
    reporter.log_episodes(1, [record("train", 1, 1), record("train", 1, 2)])  # a replay
    assert reporter.flush()
    assert slots(held) == [("train", 1, 0), ("train", 1, 1), ("train", 1, 2)]


def test_episodes_wait_while_the_database_does_not_answer(held):
    require_postgres()
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)
    reporter.log_episodes(0, [record("eval", 0, 0)])
    real_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"  # nothing listens there: connecting fails at once
    try:
        assert not reporter.flush()
        reporter.log_episodes(1, [record("train", 1, 0)])
        assert not reporter.flush()
    finally:
        connection.close()
        connection.settings_dict["PORT"] = real_port
    assert reporter.flush()
    assert slots(held) == [("eval", 0, 0), ("train", 1, 0)]


def test_a_lost_run_stores_no_episodes(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)
    Run.objects.filter(id=held.id).update(attempts=held.attempts + 1)  # requeued elsewhere
    reporter.log_episodes(1, [record("train", 1, 0)])
    reporter.flush()
    assert reporter.lost and slots(held) == []
