"""Queueing a swap job: store it with its plan, then send its id to the run's queue.

The worker task `workers.tasks.swap_job(job_id)` is sent by name, so the web process never
imports the worker (nor torch), once the transaction that stored the job commits. A job goes
to the queue its run trained on (`cpu` or `gpu`): the evaluations need the same device. A
second request for a kind already queued or running for the run gets that job back instead
of a duplicate.
"""

from __future__ import annotations

import logging

from django.db import transaction
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
