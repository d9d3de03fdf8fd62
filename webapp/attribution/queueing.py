"""Queueing a swap job: store it with its plan, then send its id to the run's queue.

The worker task `workers.tasks.swap_job(job_id)` is sent by name, so the web process never
imports the worker (nor torch), once the transaction that stored the job commits. A job goes
to the queue its run trained on (`cpu` or `gpu`): the evaluations need the same device. A
second request for a kind already queued or running for the run gets that job back instead
of a duplicate.

`requeue_stale_jobs`, part of every worker's stale-run sweep (`workers/sweep.py`), sends a
running job whose worker stopped beating back to the queue, where the next attempt evaluates
only what the last one did not store; a job that lost its worker TROUPE_MAX_ATTEMPTS times
fails, so that a new one of its kind can be queued.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from webapp.attribution.models import SwapJob
from webapp.attribution.planning import Plan
from webapp.experiments.models import Run

log = logging.getLogger(__name__)

SWAP_JOB_TASK = "workers.tasks.swap_job"


def queue_job(run: Run, plan: Plan) -> tuple[SwapJob, bool]:
    """(the job, whether it is new); the plan must have no problem."""
    if plan.problem:
        raise ValueError(plan.problem)
    with transaction.atomic():
        if plan.kind != "mix":
            active = run.swap_jobs.filter(kind=plan.kind, status__in=SwapJob.ACTIVE).first()
            if active is not None:
                return active, False
        job = SwapJob.objects.create(run=run, kind=plan.kind, plan=plan.as_json())
        transaction.on_commit(lambda: send_job(job, run.queue))
    return job, True


def send_job(job: SwapJob, queue: str) -> None:
    """Publish the job's task; a broker that cannot be reached fails the job with the reason."""
    from webapp.celery import app  # the Celery app only: no task module, no trainer

    try:
        app.send_task(SWAP_JOB_TASK, args=[job.id], queue=queue)
    except Exception as exc:  # kombu and redis-py raise many types; the advice is the same
        reason = " ".join(str(exc).split()) or type(exc).__name__
        log.warning("could not queue swap job %s: %s", job.id, reason)
        SwapJob.objects.filter(id=job.id, status=SwapJob.QUEUED).update(
            status=SwapJob.FAILED,
            finished=timezone.now(),
            error=f"Could not reach the task queue: {reason}. Queue it again later.",
        )


def requeue_stale_jobs() -> list[int]:
    """Queue again each running job silent for over TROUPE_STALE_RUN_SECONDS (a job claimed
    before jobs beat has only its start time); fail one that lost its worker too often.
    Returns the ids queued again."""
    cutoff = timezone.now() - timedelta(seconds=settings.TROUPE_STALE_RUN_SECONDS)
    silent = Q(heartbeat__lt=cutoff) | Q(heartbeat__isnull=True, started__lt=cutoff)
    requeued = []
    for job in SwapJob.objects.filter(silent, status=SwapJob.RUNNING).select_related("run"):
        # The same conditions again, plus the attempt: a job that beat, finished or was
        # claimed again since the SELECT is left alone.
        mine = SwapJob.objects.filter(
            silent, id=job.id, status=SwapJob.RUNNING, attempts=job.attempts
        )
        lost = f"Worker {job.worker or '?'} stopped answering"
        if job.attempts >= settings.TROUPE_MAX_ATTEMPTS:
            mine.update(
                status=SwapJob.FAILED,
                finished=timezone.now(),
                error=f"{lost}; the job lost its worker {job.attempts} times. It may need "
                "more memory than the worker has.",
            )
        elif mine.update(status=SwapJob.QUEUED, worker="", heartbeat=None):
            requeued.append(job.id)
            transaction.on_commit(partial(send_job, job, job.run.queue))
    return requeued
