"""Claiming runs with a conditional UPDATE, and the stale-run sweep, without a worker process:
a redelivered task is harmless, and a run whose worker stopped beating goes back to the
queue once — or is marked failed or cancelled when it should not run again."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.people import make_experiment
from webapp.experiments.models import Run, RunLog
from webapp.runs.queueing import hand_back_runs, requeue_stale_runs
from workers.execute import claim

pytestmark = pytest.mark.django_db


def test_the_first_claim_wins_and_a_second_one_gets_nothing(run):
    first = claim(run.id, worker="cpu@a", task_id="t1")
    second = claim(run.id, worker="cpu@b", task_id="t2")

    assert first is not None and second is None
    run.refresh_from_db()
    assert (run.status, run.worker, run.celery_task_id, run.attempts) == (
        "running",
        "cpu@a",
        "t1",
        1,
    )
    assert run.started and run.heartbeat


def test_a_claim_clears_the_phase_an_earlier_attempt_left(run):
    Run.objects.filter(id=run.id).update(phase="Preparing model tiny-s: warm start 40%")

    claim(run.id, worker="cpu@a", task_id="t1")

    run.refresh_from_db()
    assert run.phase == ""


def test_a_cancelled_or_finished_run_is_not_claimed(run):
    Run.objects.filter(id=run.id).update(status=Run.CANCELLED)

    assert claim(run.id, worker="cpu@a", task_id="t1") is None


def test_a_deleted_run_is_not_claimed(run):
    run_id = run.id
    run.delete()

    assert claim(run_id, worker="cpu@a", task_id="t1") is None


def stale(run, seconds=600, **fields):
    Run.objects.filter(id=run.id).update(
        status=Run.RUNNING,
        heartbeat=timezone.now() - timedelta(seconds=seconds),
        attempts=1,
        worker="cpu@dead",
        **fields,
    )


def test_a_run_whose_worker_stopped_beating_is_queued_again_and_sent(
    run, django_capture_on_commit_callbacks
):
    stale(run)

    with django_capture_on_commit_callbacks() as sends:
        assert requeue_stale_runs() == [run.id]

    run.refresh_from_db()
    assert run.status == Run.QUEUED and run.heartbeat is None and run.worker == ""
    assert len(sends) == 1  # the task is sent once the requeue commits
    assert "cpu@dead stopped answering; queued again" in RunLog.objects.get(run=run).line


def test_a_fresh_heartbeat_is_left_alone(run, settings):
    settings.TROUPE_STALE_RUN_SECONDS = 120
    stale(run, seconds=60)

    assert requeue_stale_runs() == []
    assert Run.objects.get(id=run.id).status == Run.RUNNING


def test_a_run_that_lost_its_worker_too_often_is_marked_failed(run, settings):
    settings.TROUPE_MAX_ATTEMPTS = 3
    stale(run)
    Run.objects.filter(id=run.id).update(attempts=3)

    assert requeue_stale_runs() == []

    run.refresh_from_db()
    assert (run.status, run.error_type) == (Run.FAILED, "WorkerLost")
    assert "3 times" in run.error_message


def test_a_stale_run_being_cancelled_is_marked_cancelled(run):
    stale(run, cancel_requested=True)

    assert requeue_stale_runs() == []
    assert Run.objects.get(id=run.id).status == Run.CANCELLED


def test_external_runs_have_no_heartbeat_to_miss(run):
    stale(run, external=True)

    assert requeue_stale_runs() == []


def test_the_sweep_runs_from_the_command_line(run, capsys, django_capture_on_commit_callbacks):
    stale(run)

    with django_capture_on_commit_callbacks():
        call_command("sweep_runs")

    assert capsys.readouterr().out.strip() == f"Queued again: {run.id}"


def test_a_stopped_workers_runs_are_handed_back_at_once(
    run, alice, settings, django_capture_on_commit_callbacks
):
    # Once `make run` stopped with Ctrl-C killed the worker after its grace period; the
    # run then waited for the sweep (120 s) after the restart. Its heartbeat is fresh, its
    # worker known to be gone: it is queued again now, even past the attempt limit (a stop is
    # no fault of the run). A run of another worker is left alone.
    settings.TROUPE_STALE_RUN_SECONDS = 120
    other = make_experiment(alice, name="Another").runs.get()
    for which, worker in ((run, "troupe@here"), (other, "troupe@elsewhere")):
        stale(which, seconds=5)
        attempts = settings.TROUPE_MAX_ATTEMPTS
        Run.objects.filter(id=which.id).update(worker=worker, attempts=attempts)

    with django_capture_on_commit_callbacks() as sends:
        assert hand_back_runs("troupe@here") == [run.id]

    assert Run.objects.get(id=run.id).status == Run.QUEUED and len(sends) == 1
    assert Run.objects.get(id=other.id).status == Run.RUNNING
    assert "troupe@here was stopped; queued again" in RunLog.objects.get(run=run).line
