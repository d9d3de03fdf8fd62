"""What `workers.tasks.swap_job` does: claim a swap job, run its evaluations, attribute.

1. `claim` takes the job with the lease's conditional UPDATE (queued → running,
   webapp/leases.py): a redelivered message finds it taken and does nothing. Each claim
   increments `attempts`, this worker's lease.
2. `run_job` evaluates each planned coalition the run's own evaluations do not stand for,
   with the run's own config in its own directory (`trainer/mixed_eval.py`: the model and
   each checkpoint loaded once), and stores each evaluation as it finishes, so the page shows
   progress; then `analysis.attribution.attribute` splits the change (not for a `mix` job).
   A thread beats meanwhile. An attempt after a worker that died or stopped (the sweep or the
   hand-back queued the job again) evaluates only what is missing. A cancel asked for stops
   the job after the evaluation it is on (cancelled, what was stored kept).
3. An error fails the job with its type and message; nothing is retried (it would fail again).
   Every write is conditional on the lease: a job taken over meanwhile is left to its taker,
   and the outcome is reported only when its write matched the row (else "lost").

The trainer, and so torch, is imported inside `run_job`, in the pool process.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from analysis.attribution import attribute, parse_coalition_key
from webapp import leases
from webapp.attribution.models import SwapJob
from webapp.attribution.planning import run_dir
from webapp.attribution.queueing import SWAP_JOBS
from webapp.leases import TRANSIENT_DB_ERRORS, Lease, drop_connection
from workers.tidy_errors import tidy


class JobLost(Exception):
    """The job was queued again (this worker looked dead) or deleted: stop, write nothing."""


class JobCancelled(Exception):
    """A cancel was asked for: stop after the evaluation just stored."""


def claim(job_id: int, worker: str) -> tuple[SwapJob, Lease] | None:
    """(the job, this worker's lease on it), or None when the claim was lost."""
    attempt = leases.claim(SWAP_JOBS, job_id, worker)
    if attempt is None:
        return None
    return SwapJob.objects.select_related("run").get(id=job_id), Lease(SWAP_JOBS, job_id, attempt)


def _beat(lease: Lease) -> None:
    """One beat, riding out a database that is briefly unreachable."""
    try:
        lease.beat()
    except TRANSIENT_DB_ERRORS:
        drop_connection()


def _evaluate(job: SwapJob, lease: Lease) -> dict[str, dict[str, Any]]:
    from trainer.config import config_from_dict
    from trainer.eval_problems import read_per_problem
    from trainer.mixed_eval import MixedEvaluator
    from trainer.role_sources import resolve_sources
    from workers.execute import check_user_paths

    config = check_user_paths(config_from_dict(job.run.config))
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
        _save_progress(job, lease, evaluations)
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
            _save_progress(job, lease, evaluations)
    return evaluations


def _save_progress(job: SwapJob, lease: Lease, evaluations: dict) -> None:
    job.evaluations = dict(evaluations)
    if not lease.beat(evaluations=job.evaluations):
        raise JobLost
    if lease.cancel_requested():
        raise JobLost if lease.lost else JobCancelled


def run_job(job: SwapJob, lease: Lease) -> dict[str, Any]:
    """Evaluate and attribute; the status this attempt recorded, or "lost" when the lease
    no longer held when it came to record it (nothing was written then)."""
    started = time.perf_counter()
    try:
        with leases.beating(partial(_beat, lease), "swap-job-heartbeat"):
            evaluations = _evaluate(job, lease)
        result = None
        if job.kind != "mix":
            roles = job.plan["roles"]
            table = {parse_coalition_key(k): e["per_problem"] for k, e in evaluations.items()}
            result = attribute(roles, table)
            result["seconds"] = round(time.perf_counter() - started, 1)
    except JobLost:
        return {"job": job.id, "status": "lost"}
    except JobCancelled:
        status, fields = SwapJob.CANCELLED, {}
    except Exception as exc:  # the job's record says what went wrong; the worker goes on
        error = tidy(f"{type(exc).__name__}: {exc}")  # shown to users: no worker's path
        status, fields = SwapJob.FAILED, {"error": error}
    else:
        status, fields = SwapJob.SUCCEEDED, {"result": result}
    if not lease.finish(status, **fields):
        return {"job": job.id, "status": "lost"}  # taken over meanwhile: not ours to report
    return {"job": job.id, "status": status}
