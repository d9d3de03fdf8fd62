"""What `workers.tasks.swap_job` does: claim a swap job, run its evaluations, attribute.

1. `claim` takes the job with a conditional UPDATE (queued → running): a redelivered message
   finds it taken and does nothing. Each claim increments `attempts`, this worker's lease.
2. `run_job` evaluates each planned coalition the run's own evaluations do not stand for,
   with the run's own config in its own directory (`trainer/mixed_eval.py`: the model and
   each checkpoint loaded once), and stores each evaluation as it finishes, so the page shows
   progress; then `analysis.attribution.attribute` splits the change (not for a `mix` job).
   A thread beats meanwhile. An attempt after a worker that died (the sweep queued the job
   again, `webapp.attribution.queueing.requeue_stale_jobs`) evaluates only what is missing.
3. An error fails the job with its type and message; nothing is retried (it would fail again).
   Every write is conditional on the lease: a job taken over meanwhile is left to its taker.

The trainer, and so torch, is imported inside `run_job`, in the pool process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from analysis.attribution import attribute, parse_coalition_key
from webapp.attribution.models import SwapJob
from webapp.attribution.planning import run_dir
from workers.reporter import TRANSIENT_DB_ERRORS, drop_connection


class JobLost(Exception):
    """The job was queued again (this worker looked dead) or deleted: stop, write nothing."""


def claim(job_id: int, worker: str) -> SwapJob | None:
    now = timezone.now()
    claimed = SwapJob.objects.filter(id=job_id, status=SwapJob.QUEUED).update(
        status=SwapJob.RUNNING,
        worker=worker,
        started=Coalesce("started", now),
        heartbeat=now,
        attempts=F("attempts") + 1,
    )
    return SwapJob.objects.select_related("run").get(id=job_id) if claimed else None


def _held(job: SwapJob):
    """The job's row, if this attempt still holds it."""
    return SwapJob.objects.filter(id=job.id, status=SwapJob.RUNNING, attempts=job.attempts)


@contextmanager
def beating(job: SwapJob) -> Iterator[None]:
    """Beat every TROUPE_HEARTBEAT_SECONDS while the block runs (an evaluation can take
    minutes), riding out a database that is briefly unreachable."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.TROUPE_HEARTBEAT_SECONDS):
                try:
                    _held(job).update(heartbeat=timezone.now())
                except TRANSIENT_DB_ERRORS:
                    drop_connection()
        finally:
            drop_connection()  # this thread's own connection

    thread = threading.Thread(target=beat, name="swap-job-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=settings.TROUPE_HEARTBEAT_SECONDS + 30)


def _evaluate(job: SwapJob) -> dict[str, dict[str, Any]]:
    from trainer.config import config_from_dict
    from trainer.eval_problems import read_per_problem
    from trainer.mixed_eval import MixedEvaluator
    from trainer.role_sources import resolve_sources

    config = config_from_dict(job.run.config)
    out = run_dir(job.run)
    planned = job.plan["evaluations"]
    # What an earlier attempt stored stands: a worker that died loses only its current one.
    evaluations: dict[str, dict[str, Any]] = dict(job.evaluations)
    fresh = [e for e in planned if e["reuse_step"] is None and e["key"] not in evaluations]
    # Names and RUN:NAME references only, never a path (docs/security.md).
    sources = {e["key"]: resolve_sources(e["sources"], config, out, runs=out.parent) for e in fresh}
    if any(e["reuse_step"] is not None for e in planned):
        own = read_per_problem(out)
        for e in planned:
            if e["reuse_step"] is not None:
                per_problem = own[e["reuse_step"]]
                evaluations[e["key"]] = {
                    "accuracy": sum(per_problem) / len(per_problem),
                    "per_problem": per_problem,
                    "seconds": 0.0,
                    "reused_step": e["reuse_step"],
                }
        _save_progress(job, evaluations)
    if fresh:
        evaluator = MixedEvaluator(config, list(sources.values()))
        for e in fresh:
            result = evaluator.evaluate(sources[e["key"]])
            evaluations[e["key"]] = {
                "accuracy": result["accuracy"],
                "per_problem": result["per_problem"],
                "seconds": result["seconds"],
                "reused_step": None,
            }
            _save_progress(job, evaluations)
    return evaluations


def _save_progress(job: SwapJob, evaluations: dict) -> None:
    job.evaluations = dict(evaluations)
    if not _held(job).update(evaluations=job.evaluations, heartbeat=timezone.now()):
        raise JobLost


def run_job(job: SwapJob) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        with beating(job):
            evaluations = _evaluate(job)
        result = None
        if job.kind != "mix":
            roles = job.plan["roles"]
            table = {parse_coalition_key(k): e["per_problem"] for k, e in evaluations.items()}
            result = attribute(roles, table)
            result["seconds"] = round(time.perf_counter() - started, 1)
    except JobLost:
        return {"job": job.id, "status": "lost"}
    except Exception as exc:  # the job's record says what went wrong; the worker goes on
        _held(job).update(
            status=SwapJob.FAILED,
            finished=timezone.now(),
            error=f"{type(exc).__name__}: {exc}",
        )
        return {"job": job.id, "status": SwapJob.FAILED}
    _held(job).update(status=SwapJob.SUCCEEDED, finished=timezone.now(), result=result)
    return {"job": job.id, "status": SwapJob.SUCCEEDED}
