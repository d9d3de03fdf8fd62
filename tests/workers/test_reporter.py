"""The database reporter the trainer logs to inside a worker: batched, idempotent writes, the
cancel flag, the heartbeat, the lease on the run, and a database that does not answer."""

import time

import pytest
from django.db import connection

from tests.runs import require_postgres
from webapp.experiments.models import MetricPoint, Run, RunLog
from workers.execute import claim
from workers.reporter import DatabaseReporter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(run) -> Run:
    """The run, claimed by a worker (attempt 1)."""
    return claim(run.id, worker="cpu@here", task_id="t")


def stored(run) -> list[tuple]:
    """The run's points, less the reporter's own timing (`sys/db_seconds`)."""
    points = MetricPoint.objects.filter(run=run).exclude(key="sys/db_seconds")
    return sorted(points.values_list("key", "step", "value"))


def db_seconds(run) -> dict[int, float]:
    points = MetricPoint.objects.filter(run=run, key="sys/db_seconds")
    return dict(points.values_list("step", "value"))


def test_points_are_buffered_and_written_in_one_batch(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)

    reporter.log(0, {"eval/accuracy": 0.25})
    reporter.log(1, {"train/reward": 0.5, "train/loss": float("nan")})
    assert stored(held) == []  # not yet: the batch is not due

    assert reporter.flush()
    assert stored(held) == [
        ("eval/accuracy", 0, 0.25),
        ("train/loss", 1, None),
        ("train/reward", 1, 0.5),
    ]


def test_logging_again_overwrites_instead_of_duplicating(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=0)

    reporter.log(1, {"train/reward": 0.5})
    reporter.log(1, {"train/reward": 0.75})

    assert stored(held) == [("train/reward", 1, 0.75)]


def test_progress_and_checkpoints_reach_the_runs_row_with_a_log_line(held):
    reporter = DatabaseReporter(held.id, held.attempts)

    reporter.on_progress(3, 30, {"reward": 0.5, "accuracy": 0.25, "step_seconds": 1.25})
    reporter.on_checkpoint(3, "/tmp/ckpt")

    held.refresh_from_db()
    assert (held.step, held.total_steps, held.checkpoint_step) == (3, 30, 3)
    line = RunLog.objects.get(run=held).line
    assert line == "step 3/30 · reward 0.500 · accuracy 0.250 · 1.2 s"


def test_each_step_carries_the_training_threads_database_time(held, monkeypatch):
    import workers.reporter

    real_write = workers.reporter.record_points

    def slow_write(*args):  # a slow database: every flush takes at least 0.2 s
        time.sleep(0.2)
        return real_write(*args)

    monkeypatch.setattr(workers.reporter, "record_points", slow_write)
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=0)

    reporter.log(1, {"train/reward": 0.5})  # flushes: 0.2 s, logged with the next step
    reporter.on_progress(1, 2, {})  # flushes: 0.2 s more
    reporter.log(2, {"train/reward": 0.6})
    after_step_2 = db_seconds(held)
    reporter.on_progress(2, 2, {})  # the last step's trailing calls: counted at close
    reporter.close()

    assert after_step_2[1] < 0.2  # nothing had touched the database before step 1
    assert 0.4 <= after_step_2[2] < 1.0
    assert db_seconds(held)[2] >= after_step_2[2] + 0.4  # log(2)'s flush and on_progress(2)


def test_the_status_before_the_first_step_reaches_the_runs_phase(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=0)

    reporter.on_status("Preparing model tiny-s: warm start 40%")
    held.refresh_from_db()
    assert held.phase == "Preparing model tiny-s: warm start 40%"

    reporter.on_status("")
    held.refresh_from_db()
    assert held.phase == ""


def test_statuses_wait_for_the_next_flush_and_the_latest_one_is_written(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)

    for percent in (1, 2, 3):
        reporter.on_status(f"Preparing model tiny-s: warm start {percent}%")
    held.refresh_from_db()
    assert held.phase == ""  # a status a percent is not worth a write each

    assert reporter.flush()
    held.refresh_from_db()
    assert held.phase == "Preparing model tiny-s: warm start 3%"


def test_should_stop_reads_the_cancel_flag(held):
    reporter = DatabaseReporter(held.id, held.attempts)
    assert not reporter.should_stop()

    Run.objects.filter(id=held.id).update(cancel_requested=True)

    assert reporter.should_stop()


def test_a_run_claimed_again_elsewhere_is_let_go(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=0)
    Run.objects.filter(id=held.id).update(attempts=2)  # the sweep requeued it, another took it

    reporter.log(5, {"train/reward": 0.5})

    assert reporter.lost and reporter.should_stop()
    assert stored(held) == []  # nothing written into the other attempt's run


def test_a_deleted_run_is_let_go(held):
    reporter = DatabaseReporter(held.id, held.attempts)
    Run.objects.filter(id=held.id).delete()

    assert reporter.should_stop() and reporter.lost


def test_the_heartbeat_thread_beats_and_flushes(held):
    reporter = DatabaseReporter(held.id, held.attempts, heartbeat_seconds=0.2, flush_seconds=3600)
    before = Run.objects.get(id=held.id).heartbeat
    reporter.log(1, {"train/reward": 0.5})

    reporter.start()
    time.sleep(1)
    reporter.close()

    assert Run.objects.get(id=held.id).heartbeat > before
    assert stored(held) == [("train/reward", 1, 0.5)]


def test_points_wait_while_the_database_does_not_answer_and_none_is_lost(held):
    require_postgres()
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)
    reporter.log(1, {"train/reward": 0.5})
    reporter.line("a line")
    real_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"  # nothing listens there: connecting fails at once
    try:
        assert not reporter.flush()
        assert not reporter.should_stop()  # the last answer, not an error
        reporter.log(2, {"train/reward": 0.6})
        assert not reporter.flush()
    finally:
        connection.close()
        connection.settings_dict["PORT"] = real_port

    assert reporter.flush()
    assert stored(held) == [("train/reward", 1, 0.5), ("train/reward", 2, 0.6)]
    assert list(RunLog.objects.filter(run=held).values_list("line", flat=True)) == ["a line"]
