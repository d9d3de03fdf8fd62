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
    return sorted(MetricPoint.objects.filter(run=run).values_list("key", "step", "value"))


def test_points_are_buffered_and_written_in_one_batch(held):
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)

    reporter.log(0, {"eval/accuracy": 0.25})
    reporter.log(1, {"train/reward": 0.5, "train/loss": float("nan")})
    assert stored(held) == []  # not yet: the batch is not due

    assert reporter.flush()
    assert stored(held) == [("eval/accuracy", 0, 0.25), ("train/loss", 1, None),
                            ("train/reward", 1, 0.5)]  # fmt: skip


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
