"""Celery tasks: `execute_run` (train one run) and `ping` (is a worker there?).

Task bodies import the trainer (and so torch) inside the function, so the worker's parent
process never loads it and never initialises CUDA; each run gets a fresh pool process
(`worker_max_tasks_per_child=1`).

`execute_run(run_id)`:
1. claims the run with a conditional UPDATE (queued → running); 0 rows means another worker
   has it, or it finished or was cancelled meanwhile: return, so a redelivered message is
   harmless;
2. builds the config from the run's stored dict (`trainer.config.config_from_dict`);
3. trains in `$TROUPE_DATA_DIR/runs/<run id>/`, which resumes by itself from the newest
   checkpoint there (after a failure, a cancel, or a worker that died), reporting to the
   database (`workers/reporter.py`); points past that checkpoint are deleted first, since
   the resumed run logs them again;
4. records the outcome: succeeded, cancelled, or failed with the error's type, message and
   traceback. A training error is never retried: it would fail again.

Only named transient errors are retried: the database being unreachable while claiming.
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from webapp.experiments.models import MetricPoint, Run, RunLog
from workers import sweep  # noqa: F401  (connects the stale-run sweep to worker start-up)
from workers.celery_app import app
from workers.reporter import TRANSIENT_DB_ERRORS, DatabaseReporter, drop_connection


@app.task(bind=True)
def ping(self) -> dict:
    """Answer with where the task ran: proves a message went broker → worker → result."""
    return {"pong": True, "hostname": self.request.hostname, "pid": os.getpid()}


@app.task(bind=True, max_retries=30)
def execute_run(self, run_id: int) -> dict[str, Any]:
    try:
        run = claim(run_id, worker=self.request.hostname or "", task_id=self.request.id or "")
    except TRANSIENT_DB_ERRORS as exc:
        drop_connection()
        raise self.retry(exc=exc, countdown=min(60, 2 ** (self.request.retries + 1))) from exc
    if run is None:
        return {"run": run_id, "status": "not claimed"}
    return train_run(run)


def run_dir(run_id: int):
    return settings.DATA_DIR / "runs" / str(run_id)


def claim(run_id: int, worker: str, task_id: str) -> Run | None:
    """Take the run if it is still queued: the conditional UPDATE only one claimant wins."""
    now = timezone.now()
    claimed = Run.objects.filter(id=run_id, status=Run.QUEUED, external=False).update(
        status=Run.RUNNING,
        worker=worker,
        celery_task_id=task_id,
        heartbeat=now,
        attempts=F("attempts") + 1,
        checkpoint_dir=str(run_dir(run_id)),
    )
    if not claimed:
        return None
    run = Run.objects.get(id=run_id)
    if run.started is None:
        run.started = now
        run.save(update_fields=["started"])
    return run


def train_run(run: Run) -> dict[str, Any]:
    from trainer.checkpoint import latest_checkpoint
    from trainer.config import config_from_dict
    from trainer.train import train

    out = run_dir(run.id)
    reporter = DatabaseReporter(run.id, run.attempts)
    started = time.perf_counter()
    try:
        config = config_from_dict(run.config)
        checkpoint = latest_checkpoint(out)
        resume_step = int(checkpoint.name.rsplit("-", 1)[1]) if checkpoint else None
        # The resumed run logs every step after its checkpoint again (the base-model
        # evaluation too when there is none): drop what an earlier attempt stored for them.
        MetricPoint.objects.filter(run_id=run.id, step__gt=-1 if resume_step is None else resume_step).delete()
        where = f"resuming from the checkpoint of step {resume_step}" if checkpoint else "starting"
        reporter.line(f"Worker {run.worker} took the run (attempt {run.attempts}), {where}.")
        reporter.start()
        result = train(config, out, reporter)
    except Exception as exc:
        reporter.close()
        if reporter.lost:
            return {"run": run.id, "status": "lost"}
        message = str(exc) or repr(exc)
        finish(
            run,
            status=Run.FAILED,
            error_type=type(exc).__name__,
            error_message=message,
            error_traceback=traceback.format_exc(),
            line=f"Failed: {type(exc).__name__}: {message}",
        )
        return {"run": run.id, "status": Run.FAILED}

    reporter.close()
    if reporter.lost:
        return {"run": run.id, "status": "lost"}
    seconds = time.perf_counter() - started
    status = Run.SUCCEEDED if result["status"] == "succeeded" else Run.CANCELLED
    verb = "Finished" if status == Run.SUCCEEDED else "Cancelled"
    finish(run, status=status, step=result["step"],
           line=f"{verb} at step {result['step']} after {seconds:.1f} s.")  # fmt: skip
    return {"run": run.id, "status": status, "step": result["step"]}


def finish(run: Run, *, status: str, line: str, wait_seconds: float = 300.0, **fields) -> bool:
    """Record the outcome if this attempt still holds the run, retrying while the database is
    unreachable. False when the run was taken over (or deleted) meanwhile."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            updated = Run.objects.filter(
                id=run.id, status=Run.RUNNING, attempts=run.attempts
            ).update(status=status, finished=timezone.now(), heartbeat=timezone.now(), **fields)
            if updated:
                RunLog.objects.create(run_id=run.id, line=line)
            return bool(updated)
        except TRANSIENT_DB_ERRORS:
            drop_connection()
            if time.monotonic() >= deadline:
                raise
            time.sleep(2)
