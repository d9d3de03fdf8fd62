"""Queueing a swap job: store it with its plan, then send its id to the run's queue.

Swap jobs are a kind of leased job (`SWAP_JOBS`, webapp/leases.py): sending, claiming,
beating, cancelling, the stale sweep and the hand-back when `make run` stops are the lease's,
the same as for runs. The worker task `workers.tasks.swap_job(job_id)` is sent by name, so
the web process never imports the worker (nor torch), once the transaction that stored the
job commits. A job goes to the queue its run trained on (`cpu` or `gpu`): the evaluations
need the same device. A second request for a kind already queued or running for the run gets
that job back instead of a duplicate.

A job queued again (its worker stopped beating, or stopped) evaluates only what the last
attempt did not store; a job that lost its worker TROUPE_MAX_ATTEMPTS times fails, so that a
new one of its kind can be queued. `cancel_job` cancels a queued job at once and asks a
running one to stop after its current evaluation.
"""

from __future__ import annotations

from django.db import transaction

from webapp import leases
from webapp.attribution.models import SwapJob
from webapp.attribution.planning import Plan
from webapp.experiments.models import Run

SWAP_JOB_TASK = "workers.tasks.swap_job"


def _failed(error_type: str, message: str) -> dict[str, str]:
    return {"error": message}


SWAP_JOBS = leases.register(
    leases.JobKind(
        name="swap job",
        model=SwapJob,
        task=SWAP_JOB_TASK,
        queue=lambda job: job.run.queue,
        failed=_failed,
    )
)


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
        leases.send_on_commit(SWAP_JOBS, job)
    return job, True


def send_job(job: SwapJob) -> bool:
    """Publish the job's task; a broker that cannot be reached fails the job with the reason."""
    return leases.send(SWAP_JOBS, job)


def cancel_job(job: SwapJob) -> str:
    """Cancel a queued job, or ask a running one to stop; the job's status afterwards."""
    return leases.cancel(SWAP_JOBS, job.id)


def requeue_stale_jobs() -> list[int]:
    """Queue again each running job silent for over TROUPE_STALE_RUN_SECONDS (a job claimed
    before jobs beat has only its start time); fail one that lost its worker too often.
    Returns the ids queued again."""
    return leases.requeue_stale(SWAP_JOBS)
