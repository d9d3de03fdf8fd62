"""One lease for every kind of background job (webapp/leases.py), tested once for each kind:
claiming with a conditional UPDATE, beating and finishing only while the lease holds (a lost
claim is said, never reported as done), cancelling, the stale sweep, the hand-back when a
worker is stopped, and a send the broker refuses. A new kind registers and is listed here."""

from datetime import timedelta

import pytest
from django.utils import timezone

import webapp.celery
from webapp import leases
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db

KINDS = ["run", "swap job"]


def test_every_kind_of_job_has_the_lease():
    assert sorted(kind.name for kind in leases.kinds()) == sorted(KINDS)


@pytest.fixture(params=KINDS)
def kind(request) -> leases.JobKind:
    return {k.name: k for k in leases.kinds()}[request.param]


@pytest.fixture
def job(kind, run):
    if kind.model is Run:
        return run
    return SwapJob.objects.create(run=run, kind="gain", plan={"roles": [], "evaluations": []})


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    calls = []
    monkeypatch.setattr(leases, "send", lambda kind, job: calls.append(job.id))
    return calls


def row(kind, job) -> dict:
    return kind.model.objects.values(
        "status", "worker", "attempts", "heartbeat", "cancel_requested"
    ).get(id=job.id)


def running(kind, job, *, silent_for=600, attempts=1, **fields) -> None:
    kind.model.objects.filter(id=job.id).update(
        status=leases.RUNNING,
        worker="cpu@dead",
        attempts=attempts,
        heartbeat=timezone.now() - timedelta(seconds=silent_for),
        started=timezone.now() - timedelta(hours=1),
        **fields,
    )


def test_the_first_claim_wins_and_a_second_gets_nothing(kind, job):
    assert leases.claim(kind, job.id, "cpu@a") == 1
    assert leases.claim(kind, job.id, "cpu@b") is None
    now = row(kind, job)
    assert (now["status"], now["worker"], now["attempts"]) == ("running", "cpu@a", 1)


def test_a_lease_beats_and_finishes_only_while_it_holds(kind, job):
    lease = leases.Lease(kind, job.id, leases.claim(kind, job.id, "cpu@a"))
    assert lease.beat() and not lease.lost

    leases.hand_back(kind, "cpu@a")  # the worker was taken for stopped
    taker = leases.Lease(kind, job.id, leases.claim(kind, job.id, "cpu@b"))

    assert not lease.beat() and lease.lost
    assert lease.finish(leases.SUCCEEDED) is False  # the lost-claim check
    assert row(kind, job)["status"] == "running" and row(kind, job)["worker"] == "cpu@b"
    assert taker.finish(leases.SUCCEEDED) is True
    assert row(kind, job)["status"] == "succeeded"


def test_a_queued_job_is_cancelled_at_once(kind, job):
    assert leases.cancel(kind, job.id) == leases.CANCELLED
    assert row(kind, job)["status"] == "cancelled"
    assert leases.claim(kind, job.id, "cpu@a") is None


def test_a_running_job_is_asked_to_stop_and_its_holder_hears_it(kind, job):
    lease = leases.Lease(kind, job.id, leases.claim(kind, job.id, "cpu@a"))
    assert not lease.cancel_requested()

    assert leases.cancel(kind, job.id) == leases.RUNNING

    assert lease.cancel_requested() and not lease.lost
    assert lease.finish(leases.CANCELLED)
    assert leases.cancel(kind, job.id) == leases.CANCELLED  # nothing left to cancel


def test_a_silent_job_is_queued_again_and_sent_once(
    kind, job, sent, django_capture_on_commit_callbacks
):
    running(kind, job)

    with django_capture_on_commit_callbacks(execute=True):
        assert leases.requeue_stale_all()[kind.name] == [job.id]
        assert leases.requeue_stale(kind) == []  # a second sweep finds nothing

    now = row(kind, job)
    assert (now["status"], now["worker"], now["heartbeat"]) == ("queued", "", None)
    assert sent == [job.id]


def test_a_job_that_beats_is_left_alone(kind, job, settings):
    settings.TROUPE_STALE_RUN_SECONDS = 120
    running(kind, job, silent_for=60)

    assert leases.requeue_stale(kind) == []
    assert row(kind, job)["status"] == "running"


def test_a_job_that_lost_its_worker_too_often_fails(kind, job, settings):
    settings.TROUPE_MAX_ATTEMPTS = 3
    running(kind, job, attempts=3)

    assert leases.requeue_stale(kind) == []

    failed = kind.model.objects.get(id=job.id)
    assert failed.status == "failed" and failed.finished
    said = getattr(failed, "error_message", None) or failed.error
    assert "lost its worker 3 times" in said


def test_a_silent_job_being_cancelled_is_cancelled(kind, job):
    running(kind, job, cancel_requested=True)

    assert leases.requeue_stale(kind) == []
    assert row(kind, job)["status"] == "cancelled"


def test_a_stopped_workers_jobs_are_handed_back_counting_no_attempt(
    kind, job, sent, settings, django_capture_on_commit_callbacks
):
    settings.TROUPE_MAX_ATTEMPTS = 3
    running(kind, job, silent_for=0, attempts=3)  # beating a moment ago, on its last attempt

    with django_capture_on_commit_callbacks(execute=True):
        assert leases.hand_back_all("cpu@other")[kind.name] == []
        assert leases.hand_back_all("cpu@dead")[kind.name] == [job.id]

    assert row(kind, job)["status"] == "queued" and sent == [job.id]


def test_a_send_the_broker_refuses_fails_the_job_with_the_reason(kind, job, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(webapp.celery.app, "send_task", refuse)

    assert leases.send(kind, job) is False

    failed = kind.model.objects.get(id=job.id)
    said = getattr(failed, "error_message", None) or failed.error
    assert failed.status == "failed" and "Could not reach the task queue: broker down" in said
