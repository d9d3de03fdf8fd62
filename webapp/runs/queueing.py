"""Turning specs into queued runs, and runs into Celery messages.

- `create_experiment` expands a spec (preset, field values, matrix axes) with
  `trainer.config.expand_matrix`, stores the experiment and one run per matrix cell, and
  sends each run to its queue once the transaction commits.
- `queue_for` routes a run by device: `cuda` → `gpu`, `cpu` → `cpu`; `auto` → `gpu` for real
  (Hugging Face) models and `cpu` for the built-in tiny ones, which are made for the CPU.
- `send_run` publishes `workers.tasks.execute_run(run_id)` by name, so the web process never
  imports the task module (nor, through it, the trainer). Only the id travels: the database is
  the truth, and a message delivered twice is harmless because workers claim runs with a
  conditional UPDATE.
- `resume_run`, `cancel_run` and `requeue_stale_runs` move runs between states, each with a
  conditional UPDATE, so two requests (or two workers) racing over a run never both win.
- Runs start in the order they are sent: Redis queues are first in, first out, and on the
  embedded filesystem broker no two sends share a millisecond (its messages' order).

Tasks are sent once the transaction that queued the run commits (`transaction.on_commit`), so
a worker never looks for a run that is not there yet, and nothing is sent for a rolled-back one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from trainer.config import TINY_MODELS, Config, ConfigError, expand_matrix
from trainer.offline import offline_reason
from webapp.experiments.models import Experiment, Run, RunLog
from webapp.runs.checkpoint_refs import start_from_reference
from webapp.runs.name_claims import claim_name
from webapp.runs.worker_gpus import check_gpus

log = logging.getLogger(__name__)

EXECUTE_RUN = "workers.tasks.execute_run"
LOCAL_PATH_PREFIXES = ("/", "./", "../", "~")  # trainer.config's test for a local path
HUB_TIMEOUT_SECONDS = 5  # how long a submit waits for the Hub to say whether a model exists


def queue_for(config: Config) -> str:
    if config.device == "cuda":
        return "gpu"
    if config.device == "cpu":
        return "cpu"
    return "cpu" if config.model in TINY_MODELS else "gpu"


def new_run(experiment: Experiment, config: Config) -> Run:
    return Run(
        experiment=experiment,
        config=config.to_dict(),
        config_hash=config.hash(),
        workflow=config.workflow,
        task=config.task,
        model=config.model,
        sharing=config.sharing,
        seed=config.seed,
        queue=queue_for(config),
        total_steps=config.steps,
    )


def _missing_local_model(model: str) -> str | None:
    """Why a local model path cannot be used, or None. Hugging Face ids and the tiny models
    are the worker's to find; a path is checked here, where the web server sees the same
    data directory as the workers, so a typo is named in the form and not hours later."""
    if not model.startswith(LOCAL_PATH_PREFIXES):
        return None
    path = Path(os.path.expanduser(model))
    if not path.is_dir():
        return f"there is no directory {model!r} on this server"
    if not (path / "config.json").exists():
        return f"{model!r} holds no model: save one there with save_pretrained (config.json)"
    return None


def _hub_model_check(model: str) -> tuple[str | None, str | None]:
    """(why a Hugging Face id cannot be used, or None; what to tell the user, or None). A
    model in this machine's Hugging Face cache exists. Otherwise the Hub is asked where this
    node may reach it: an id it does not know is refused at submit time, not hours later on
    a worker. A gated model, an unreachable Hub or an offline node cannot say no:
    the run is accepted, with a word that the worker will have to find the model."""
    if model in TINY_MODELS or model.startswith(LOCAL_PATH_PREFIXES) or "/" not in model:
        return None, None
    from huggingface_hub import model_info, try_to_load_from_cache
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError

    try:
        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return None, None
    except ValueError:  # not an id the Hub could hold (trainer.config let it through)
        return f"{model!r} is not a Hugging Face model id", None
    if reason := offline_reason():
        return None, (
            f"model {model!r} is not in this server's Hugging Face cache and {reason}, so it "
            "was not checked: the worker must find it in its own cache"
        )
    try:
        model_info(model, timeout=HUB_TIMEOUT_SECONDS)
    except GatedRepoError:
        return None, f"model {model!r} is gated on the Hub: the worker needs a token for it"
    except RepositoryNotFoundError:
        return (
            f"there is no model {model!r} on the Hugging Face Hub (or it is private): check "
            "the id's spelling, e.g. Qwen/Qwen3-0.6B"
        ), None
    except Exception as exc:  # noqa: BLE001 - a network failure must not refuse a good run
        return None, (
            f"could not ask the Hugging Face Hub whether {model!r} exists "
            f"({type(exc).__name__}): the worker will download it or say why not"
        )
    return None, None


def check_models(configs: list[Config]) -> list[str]:
    """ConfigError naming `model` when a local model path does not hold a model or the Hub
    does not know a Hugging Face id; the warnings to show for ids that could not be
    checked."""
    warnings = []
    for model in sorted({config.model for config in configs}):
        problem, warning = _missing_local_model(model), None
        if problem is None:
            problem, warning = _hub_model_check(model)
        if problem:
            raise ConfigError({"model": problem})
        if warning:
            warnings.append(warning)
    return warnings


def create_experiment(
    owner,
    name: str,
    *,
    description: str = "",
    preset: str = "",
    config: dict[str, Any] | None = None,
    matrix: dict[str, list] | None = None,
) -> Experiment:
    """Store the experiment and its runs and queue them; ConfigError (naming the fields, or
    `matrix.<axis>`) before anything is stored when the spec is invalid, or when no live
    worker has the GPUs a run needs. `experiment.warnings` lists what to tell the user."""
    configs = expand_matrix(config or {}, matrix or {}, preset or None)
    warnings = check_models(configs)
    warnings += check_gpus(configs)  # ConfigError when no live worker has the GPUs
    configs = start_from_reference(owner, config or {}, configs)  # init_from: RUN:NAME
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=owner,
            name=name,
            description=description,
            preset=preset or "",
            base_config=dict(config or {}),
            matrix=dict(matrix or {}),
        )
        claim_name(experiment)  # one experiment per name for MLflow clients too
        runs = Run.objects.bulk_create([new_run(experiment, c) for c in configs])
        transaction.on_commit(lambda: send_runs(runs))
    experiment.warnings = warnings  # for the form's message and the API's answer
    return experiment


def send_runs(runs: list[Run]) -> None:
    for run in runs:
        send_run(run)


_last_send_ms = 0
_send_lock = threading.Lock()


def _monotonic_ms() -> int:
    return int(round(time.monotonic() * 1000))  # kombu's filesystem transport's own clock


def _send_in_order(send) -> None:
    """Call `send` once the clock has moved past the millisecond the previous send ended in
    (a millisecond's wait at most). kombu's filesystem transport names a message
    `<monotonic ms>_<uuid>` and hands messages out in name order, so two sent within one
    millisecond come out in random order: runs queued together would not start in the order
    they were queued."""
    global _last_send_ms
    with _send_lock:
        while _monotonic_ms() <= _last_send_ms:
            time.sleep(0.0002)
        try:
            send()
        finally:
            _last_send_ms = _monotonic_ms()  # the message's name holds this or an earlier ms


def send_run(run: Run) -> bool:
    """Publish the run's task; when the broker cannot be reached the run is marked failed
    (QueueUnavailable) with the reason, so it can be resumed later instead of waiting forever."""
    from webapp.celery import app  # the Celery app only: no task module, no trainer

    task_id = str(uuid.uuid4())
    Run.objects.filter(id=run.id).update(celery_task_id=task_id)
    try:
        send = partial(app.send_task, EXECUTE_RUN, args=[run.id], queue=run.queue, task_id=task_id)
        if urlsplit(app.conf.broker_url or "").scheme == "filesystem":
            _send_in_order(send)
        else:
            send()
    except Exception as exc:  # kombu and redis-py raise many types; the advice is the same
        reason = " ".join(str(exc).split()) or type(exc).__name__
        log.warning("could not queue run %s: %s", run.id, reason)
        Run.objects.filter(id=run.id, status=Run.QUEUED).update(
            status=Run.FAILED,
            finished=timezone.now(),
            error_type="QueueUnavailable",
            error_message=f"Could not reach the task queue: {reason}. Resume the run once "
            "the broker is back.",
        )
        return False
    return True


def add_log(run_id: int, line: str) -> None:
    RunLog.objects.create(run_id=run_id, line=line)


def cancel_run(run: Run) -> str:
    """Cancel a queued run at once, or ask a running one to stop after its current step.

    Returns the run's status afterwards ("cancelled", "running", or a finished status when
    there was nothing to cancel).
    """
    now = timezone.now()
    if Run.objects.filter(id=run.id, status=Run.QUEUED).update(
        status=Run.CANCELLED, finished=now, cancel_requested=True
    ):
        add_log(run.id, "Cancelled before it started.")
        return Run.CANCELLED
    if run.external and Run.objects.filter(id=run.id, status=Run.RUNNING).update(
        status=Run.CANCELLED, finished=now, cancel_requested=True
    ):
        return Run.CANCELLED
    if Run.objects.filter(id=run.id, status=Run.RUNNING).update(cancel_requested=True):
        add_log(run.id, "Cancel requested; the run stops after its current step.")
        return Run.RUNNING
    return Run.objects.values_list("status", flat=True).get(id=run.id)


def resume_run(run: Run) -> bool:
    """Queue a failed or cancelled run again; it continues from its last checkpoint."""
    if not run.resumable:
        return False
    updated = Run.objects.filter(id=run.id, status__in=(Run.FAILED, Run.CANCELLED)).update(
        status=Run.QUEUED,
        cancel_requested=False,
        finished=None,
        error_type="",
        error_message="",
        error_traceback="",
    )
    if not updated:
        return False
    add_log(run.id, "Queued again; it resumes from its last checkpoint.")
    run.refresh_from_db()
    transaction.on_commit(lambda: send_run(run))
    return True


def requeue_stale_runs() -> list[int]:
    """Put back in the queue every running run whose worker stopped beating (a crash, a kill,
    a lost node) for longer than TROUPE_STALE_RUN_SECONDS; it resumes from its checkpoint.

    A run already tried TROUPE_MAX_ATTEMPTS times is marked failed (WorkerLost) instead, and a
    run whose cancel was requested is marked cancelled. Returns the ids queued again.
    """
    cutoff = timezone.now() - timedelta(seconds=settings.TROUPE_STALE_RUN_SECONDS)
    return _requeue(Q(heartbeat__lt=cutoff), "stopped answering", limit_attempts=True)


def hand_back_runs(worker: str) -> list[int]:
    """Put back in the queue the running runs of `worker`, a worker known to have stopped
    (`make run` stopped it, or killed it after its grace period): the next start resumes them
    at once from their last checkpoint, not after TROUPE_STALE_RUN_SECONDS of silence
    (once it waited for that). A run being cancelled is cancelled; a stop is no fault of the
    run, so it counts against no attempt limit. Returns the ids queued again."""
    return _requeue(Q(worker=worker), "was stopped", limit_attempts=False)


def _requeue(which: Q, what_happened: str, *, limit_attempts: bool) -> list[int]:
    now = timezone.now()
    stale = Run.objects.filter(which, status=Run.RUNNING, external=False)
    requeued = []
    for run in stale.only("id", "attempts", "cancel_requested", "queue", "worker"):
        # The same conditions again, plus the attempt: a run that beat, finished or was
        # claimed again since the SELECT is left alone.
        mine = Run.objects.filter(which, id=run.id, status=Run.RUNNING, attempts=run.attempts)
        silent = f"Worker {run.worker or '?'} {what_happened}"
        if run.cancel_requested:
            if mine.update(status=Run.CANCELLED, finished=now):
                add_log(run.id, f"{silent}; the run was being cancelled: cancelled.")
        elif limit_attempts and run.attempts >= settings.TROUPE_MAX_ATTEMPTS:
            message = f"{silent}; the run lost its worker {run.attempts} times."
            if mine.update(
                status=Run.FAILED,
                finished=now,
                error_type="WorkerLost",
                error_message=message + " It may need more memory than the worker has.",
            ):
                add_log(run.id, message + " Marked failed.")
        elif mine.update(status=Run.QUEUED, worker="", heartbeat=None):
            add_log(run.id, f"{silent}; queued again to resume from its last checkpoint.")
            requeued.append(run.id)
            transaction.on_commit(partial(send_run, run))
    return requeued
