"""What `workers.tasks.execute_run` does with a run: claim it, train it, record the outcome.

1. `claim_next` takes the first queued run of the message's queue, in queue order, with the
   lease's conditional UPDATE (queued → running, webapp/leases.py); 0 rows means another
   worker has it, or it finished or was cancelled meanwhile, so a redelivered message is
   harmless. Each claim increments `attempts`: the attempt is this worker's lease on the run.
   A run handed back keeps its place in the queue, so it resumes first.
2. `train_run` builds the config from the run's stored dict
   (`trainer.config.config_from_dict`) and trains in `$TROUPE_DATA_DIR/runs/<run id>/`,
   which resumes by itself from the newest checkpoint there (after a failure, a cancel, or a
   worker that died), reporting to the database (`workers/reporter.py`). Points (and
   recorded episodes) past that checkpoint are deleted first: the resumed run logs them
   again, so every (key, step) is stored once; when that checkpoint lies before the step the
   run had reached, its progress goes back to it and the run page says so (`rewind`). A run
   with `world_size` > 1 trains with this process as rank 0 and the other ranks as its
   children (`workers/ranks.py`), on a worker with that many GPUs.
3. `finish` records the outcome — succeeded, cancelled, or failed with the error's type,
   message and traceback — if this attempt still holds the run, and with it the live
   radar's verdict on the finished run (`alerts.settle_run`).

The trainer (and so torch) is imported inside `train_run`, which runs in the pool process.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from webapp import leases
from webapp.alerts.radar import settle_run
from webapp.episodes.store import delete_from as delete_episodes_from
from webapp.experiments.models import Run, RunLog
from webapp.leases import Lease
from webapp.metrics import delete_points_from
from webapp.runs.queueing import RUNS
from workers.branch_points import check_init_from
from workers.ranks import RankLost
from workers.reporter import DatabaseReporter, retrying
from workers.tidy_errors import tidy

CLAIM_TRIES = 20  # queued runs a message tries to claim before giving up (others won them)


def run_dir(run_id: int) -> Path:
    return settings.DATA_DIR / "runs" / str(run_id)


def claim(run_id: int, worker: str, task_id: str) -> Run | None:
    """Take the run if it is still queued: the lease's conditional UPDATE only one claimant
    wins (webapp/leases.py)."""
    attempt = leases.claim(
        RUNS,
        run_id,
        worker,
        celery_task_id=task_id,
        checkpoint_dir=str(run_dir(run_id)),
        phase="",  # what an earlier attempt was doing is not what this one does
    )
    return None if attempt is None else Run.objects.get(id=run_id)


def claim_next(run_id: int, worker: str, task_id: str) -> Run | None:
    """Take the first queued run of the queue `run_id` was sent to, in queue order
    (`enqueued`, then id): a run handed back or swept keeps its place, so it resumes before
    the runs queued behind it even though its new message came after theirs. Each queued run
    has a message of its own on that queue, so a message that finds its run taken takes
    another, and the one left over later finds nothing: no run waits without a message."""
    queue = Run.objects.filter(id=run_id).values_list("queue", flat=True).first()
    if queue is None:  # deleted: its message stands for nothing
        return None
    waiting = Run.objects.filter(status=Run.QUEUED, external=False, queue=queue).order_by(
        F("enqueued").asc(nulls_first=True), "id"
    )
    for candidate in waiting.values_list("id", flat=True)[:CLAIM_TRIES]:
        if run := claim(candidate, worker, task_id):
            return run
    return None


def rewind(run: Run, step: int, reporter: DatabaseReporter) -> None:
    """Say so when the run resumes from a checkpoint before the step it had reached: its
    progress goes back to `step`, and the page says why (`Run.step_words`)."""
    if run.step <= step:
        return
    reporter.lease.beat(step=step, rewound_from=run.step)
    reporter.line(
        f"Progress goes back from step {run.step} to step {step}: steps after the last "
        "checkpoint are trained again."
    )


def start_config(stored: dict):
    """The run's config as the trainer takes it: `init_from` the branch point's folder, and
    no other file a user may not name (trainer/user_paths.py)."""
    from trainer.config import config_from_dict

    config = check_user_paths(config_from_dict(stored))
    return dataclasses.replace(config, init_from=check_init_from(config.init_from))


def check_user_paths(config):
    """`config` unchanged, or ValueError where it names a model or dataset outside the data
    directory's folders a user may name (trainer/user_paths.py): an older row, or one
    written by hand, is refused before anything reads it."""
    from trainer.user_paths import outside_user_folders

    if problems := outside_user_folders(config, Path(settings.DATA_DIR)):
        raise ValueError("; ".join(problems.values()))
    return config


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
        from trainer.train import train

        # Only a branch point the server froze; the trainer gets its folder (the same path on
        # every attempt, so the same config hash), not the data-relative name stored.
        config = start_config(run.config)
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
        retrying(lambda: rewind(run, 0 if start is None else start.step, reporter))
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
        if isinstance(exc, RankLost):
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
    """Record the outcome if this attempt still holds the run (`webapp.leases.Lease.finish`),
    retrying while the database is unreachable. False when the run was taken over (or
    deleted) meanwhile."""
    lease = Lease(RUNS, run.id, run.attempts)

    def record() -> bool:
        with transaction.atomic():  # the outcome and the radar's verdict on it, together
            if not lease.finish(status, **fields):
                return False
            RunLog.objects.create(run_id=run.id, line=line)
            settle_run(run.id)
        return True

    return retrying(record, wait_seconds)


def forget_from(run_id: int, step: int) -> None:
    """Delete the points and recorded episodes an earlier attempt stored from `step` on."""
    with transaction.atomic():
        delete_points_from(run_id, step)
        delete_episodes_from(run_id, step)
