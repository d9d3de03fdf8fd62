"""Celery tasks: `execute_run` (train one run), `swap_job` (mix-and-match evaluations and
their attribution) and `ping` (is a worker there?).

Only ids travel in messages; the database is the truth. Task bodies import what they need
inside the function — the trainer, and so torch, only in the pool process that runs a run —
so the worker's parent process never loads torch nor initialises CUDA, and a client that only
sends tasks (`python -m workers.ping`) needs no Django set-up. Importing this module also
connects the stale-run sweep (`workers/sweep.py`) and the sandbox report
(`workers/sandbox_report.py`) to worker start-up.

`execute_run(run_id)` claims the first queued run of the queue `run_id` was sent to (a run
handed back first) with a conditional UPDATE, trains it and records the outcome
(`workers/execute.py`). Only named transient errors are retried: the database being
unreachable while claiming. A training error is never retried — it would fail again — and
marks the run failed with its type, message and traceback.
"""

import os

from webapp.celery import app

# Imported for what they connect to worker start-up: the stale-run sweep, the sandbox report.
from workers import sandbox_report, sweep  # noqa: F401


@app.task(bind=True)
def ping(self) -> dict:
    """Answer with where the task ran: proves a message went broker → worker → result."""
    return {"pong": True, "hostname": self.request.hostname, "pid": os.getpid()}


@app.task(bind=True, max_retries=30)
def execute_run(self, run_id: int) -> dict:
    from webapp.leases import TRANSIENT_DB_ERRORS, drop_connection
    from workers.execute import claim_next, train_run

    try:
        run = claim_next(run_id, worker=self.request.hostname or "", task_id=self.request.id or "")
    except TRANSIENT_DB_ERRORS as exc:
        drop_connection()
        raise self.retry(exc=exc, countdown=min(60, 2 ** (self.request.retries + 1))) from exc
    if run is None:
        return {"run": run_id, "status": "not claimed"}
    return train_run(run)


@app.task(bind=True)
def swap_job(self, job_id: int) -> dict:
    """Mix-and-match evaluations of a run and their attribution (`workers/attribution.py`)."""
    from workers.attribution import claim, run_job

    claimed = claim(job_id, worker=self.request.hostname or "")
    if claimed is None:
        return {"job": job_id, "status": "not claimed"}
    return run_job(*claimed)
