"""What `workers.tasks.execute_run` does with a run: claim it, train it, record the outcome.

1. `claim` takes the run with a conditional UPDATE (queued → running); 0 rows means another
   worker has it, or it finished or was cancelled meanwhile, so a redelivered message is
   harmless. Each claim increments `attempts`: the attempt is this worker's lease on the run.
2. `train_run` builds the config from the run's stored dict
   (`trainer.config.config_from_dict`) and trains in `$TROUPE_DATA_DIR/runs/<run id>/`,
   which resumes by itself from the newest checkpoint there (after a failure, a cancel, or a
   worker that died), reporting to the database (`workers/reporter.py`). Points (and
   recorded episodes) past that checkpoint are deleted first: the resumed run logs them
   again, so every (key, step) is stored once. A run with `world_size` > 1 trains with this
   process as rank 0 and the other ranks as its children (`workers/ranks.py`), on a worker
   with that many GPUs.
3. `finish` records the outcome — succeeded, cancelled, or failed with the error's type,
   message and traceback — if this attempt still holds the run, and with it the live
   radar's verdict on the finished run (`alerts.settle_run`).

The trainer (and so torch) is imported inside `train_run`, which runs in the pool process.
"""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webapp.alerts.radar import settle_run
from webapp.episodes.store import delete_from as delete_episodes_from
from webapp.experiments.models import Run, RunLog
from webapp.metrics import delete_points_from
from workers.branch_points import check_init_from
from workers.reporter import DatabaseReporter, retrying
from workers.tidy_errors import tidy


def run_dir(run_id: int) -> Path:
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
        phase="",  # what an earlier attempt was doing is not what this one does
    )
    if not claimed:
        return None
    run = Run.objects.get(id=run_id)
    if run.started is None:
        run.started = now
        run.save(update_fields=["started"])
    return run


def train_run(run: Run) -> dict[str, Any]:
    out = run_dir(run.id)
    if run.attempts == 1 and out.exists():
        # A first attempt starts from nothing: a directory left under this id (by a database
        # since reset, or another instance sharing the data directory) is not this run's.
        shutil.rmtree(out)
    reporter = DatabaseReporter(run.id, run.attempts)
    # Beat from now on: importing torch and loading the model take a while, and a silent
    # worker looks like a dead one to the sweep.
    reporter.start()
    started = time.perf_counter()
    try:
        from trainer.checkpoint_index import first_logged_step, is_own, resume_point
        from trainer.config import config_from_dict
        from trainer.train import train

        config = config_from_dict(run.config)
        check_init_from(config.init_from)  # only a branch point the server froze
        if config.world_size > 1:
            from workers.ranks import gpu_problem

            if problem := gpu_problem(config.world_size):
                raise ValueError(problem)  # before anything starts: the run fails with it
        start = resume_point(out, config.init_from)
        # The run logs every step from `first` on again (after its own checkpoint; from the
        # branch point, or the base-model evaluation, when it has none): drop what an earlier
        # attempt stored for them.
        first = first_logged_step(out, config.init_from)
        # Recorded episodes too, as points; a database restarting just now delays the attempt
        # rather than failing the run.
        retrying(lambda: forget_from(run.id, first))
        if start is None:
            where = "starting"
        elif is_own(start, out):
            where = f"resuming from the checkpoint of step {start.step}"
        else:
            where = f"branching from {start.path.name} (step {start.step})"
        reporter.line(f"Worker {run.worker} took the run (attempt {run.attempts}), {where}.")
        if config.world_size > 1:
            from workers.ranks import ranks

            with ranks(config, out) as world:  # this process is rank 0, and reports
                result = train(config, out, reporter, world=world)
        else:
            result = train(config, out, reporter)
    except Exception as exc:
        if type(exc).__name__ == "RankLost":
            # Like a worker that died: stop beating, and the sweep queues the run again.
            reporter.line(f"{exc}; the run will be queued again to resume.")
            reporter.close()
            return {"run": run.id, "status": "lost"}
        trace = tidy(traceback.format_exc())  # no path of the worker's disk is shown
        reporter.close()
        if reporter.lost:
            return {"run": run.id, "status": "lost"}
        message = tidy(str(exc) or repr(exc))
        finish(
            run,
            status=Run.FAILED,
            error_type=type(exc).__name__,
            error_message=message,
            error_traceback=trace,
            line=f"Failed: {type(exc).__name__}: {message}",
        )
        return {"run": run.id, "status": Run.FAILED}

    reporter.close()
    if reporter.lost:
        return {"run": run.id, "status": "lost"}
    seconds = time.perf_counter() - started
    status = Run.SUCCEEDED if result["status"] == "succeeded" else Run.CANCELLED
    verb = "Finished" if status == Run.SUCCEEDED else "Cancelled"
    finish(
        run,
        status=status,
        step=result["step"],
        line=f"{verb} at step {result['step']} after {seconds:.1f} s.",
    )
    return {"run": run.id, "status": status, "step": result["step"]}


def finish(run: Run, *, status: str, line: str, wait_seconds: float = 300.0, **fields) -> bool:
    """Record the outcome if this attempt still holds the run, retrying while the database is
    unreachable. False when the run was taken over (or deleted) meanwhile."""

    def record() -> bool:
        with transaction.atomic():  # the outcome and the radar's verdict on it, together
            updated = Run.objects.filter(
                id=run.id, status=Run.RUNNING, attempts=run.attempts
            ).update(status=status, finished=timezone.now(), heartbeat=timezone.now(), **fields)
            if updated:
                RunLog.objects.create(run_id=run.id, line=line)
                settle_run(run.id)
        return bool(updated)

    return retrying(record, wait_seconds)


def forget_from(run_id: int, step: int) -> None:
    """Delete the points and recorded episodes an earlier attempt stored from `step` on."""
    with transaction.atomic():
        delete_points_from(run_id, step)
        delete_episodes_from(run_id, step)
