"""The stale-run sweep's part for swap jobs (`webapp.attribution.queueing.requeue_stale_jobs`):
a running job whose worker stopped beating goes back to the queue with what it stored; one
that beats is left alone; one that lost its worker too often fails with the reason, and no
longer blocks a new job of its kind."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from webapp import leases
from webapp.attribution import queueing
from webapp.attribution.models import SwapJob

pytestmark = pytest.mark.django_db

PLAN = {"roles": ["generator", "aggregator"], "evaluations": []}
STORED = {"-": {"accuracy": 0.25, "per_problem": [0.25], "seconds": 1.0, "reused_step": None}}


@pytest.fixture
def sent(monkeypatch) -> list[tuple[int, str]]:
    calls = []
    monkeypatch.setattr(leases, "send", lambda kind, job: calls.append((job.id, kind.queue(job))))
    return calls


def running_job(run, *, silent_for: float | None, attempts: int = 1, **fields) -> SwapJob:
    """A job a worker took, whose last beat was `silent_for` seconds ago (None: never)."""
    now = timezone.now()
    beat = None if silent_for is None else now - timedelta(seconds=silent_for)
    return SwapJob.objects.create(
        run=run,
        kind="gain",
        plan=PLAN,
        status=SwapJob.RUNNING,
        worker="gone@node-3",
        attempts=attempts,
        heartbeat=beat,
        started=now - timedelta(hours=1),
        evaluations=STORED,
        **fields,
    )


def sweep(django_capture_on_commit_callbacks) -> list[int]:
    with django_capture_on_commit_callbacks(execute=True):
        return queueing.requeue_stale_jobs()


def test_a_silent_job_is_queued_again_with_what_it_stored(
    run, sent, django_capture_on_commit_callbacks
):
    job = running_job(run, silent_for=600)

    assert sweep(django_capture_on_commit_callbacks) == [job.id]

    job.refresh_from_db()
    assert (job.status, job.worker, job.heartbeat, job.attempts) == (SwapJob.QUEUED, "", None, 1)
    assert job.evaluations == STORED  # the next attempt evaluates only the rest
    assert sent == [(job.id, run.queue)]


def test_a_job_claimed_before_jobs_beat_counts_from_its_start(
    run, sent, django_capture_on_commit_callbacks
):
    job = running_job(run, silent_for=None)
    assert sweep(django_capture_on_commit_callbacks) == [job.id]


def test_a_beating_job_is_left_alone(run, sent, django_capture_on_commit_callbacks):
    job = running_job(run, silent_for=1)

    assert sweep(django_capture_on_commit_callbacks) == []
    job.refresh_from_db()
    assert job.status == SwapJob.RUNNING and sent == []


def test_a_job_that_lost_its_worker_too_often_fails_and_blocks_nothing(
    run, sent, settings, django_capture_on_commit_callbacks
):
    job = running_job(run, silent_for=600, attempts=settings.TROUPE_MAX_ATTEMPTS)
    assert run.swap_jobs.filter(kind="gain", status__in=SwapJob.ACTIVE).exists()

    assert sweep(django_capture_on_commit_callbacks) == []

    job.refresh_from_db()
    assert job.status == SwapJob.FAILED and job.finished is not None and sent == []
    assert job.error == (
        f"Worker gone@node-3 stopped answering; the swap job lost its worker "
        f"{settings.TROUPE_MAX_ATTEMPTS} times. It may need more memory than the worker has."
    )
    assert not run.swap_jobs.filter(kind="gain", status__in=SwapJob.ACTIVE).exists()


def test_the_sweep_by_hand_queues_a_silent_job_again_too(
    run, sent, capsys, django_capture_on_commit_callbacks
):
    job = running_job(run, silent_for=600)

    with django_capture_on_commit_callbacks(execute=True):
        call_command("sweep_runs")

    out = capsys.readouterr().out
    assert "Queued again: none" in out and f"Queued again (swap jobs): {job.id}" in out
    assert SwapJob.objects.get(id=job.id).status == SwapJob.QUEUED and sent == [(job.id, "cpu")]
