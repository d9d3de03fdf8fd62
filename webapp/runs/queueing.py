"""Turning specs into queued runs, and runs into Celery messages.

- `create_experiment` expands a spec (preset, field values, matrix axes) with
  `trainer.config.expand_matrix`, stores the experiment and one run per matrix cell, and
  sends each run to its queue once the transaction commits.
- `queue_for` routes a run by device: `cuda` → `gpu`, `cpu` → `cpu`; `auto` → `gpu` for real
  (Hugging Face) models and `cpu` for the built-in tiny ones, which are made for the CPU.
- Runs are the first kind of leased job (`RUNS`, webapp/leases.py): sending, claiming,
  beating, cancelling, the stale sweep and the hand-back on stop are the lease's, the same
  as for swap jobs. `send_run` publishes `workers.tasks.execute_run(run_id)` by name, so the
  web process never imports the task module (nor, through it, the trainer). Only the id
  travels: the database is the truth, and a message delivered twice is harmless because
  workers claim runs with a conditional UPDATE.
- `resume_run`, `cancel_run` and `requeue_stale_runs` move runs between states, each with a
  conditional UPDATE, so two requests (or two workers) racing over a run never both win.
- Runs start in queue order: a message stands for "a run of this queue is waiting", and
  the worker that takes it claims the queue's first queued run by `enqueued` (when it joined
  the queue; `workers/execute.py`), not necessarily the run it names. A run handed back or
  swept keeps its `enqueued`, so it resumes before the runs queued behind it; a resume asked
  for joins the back. Messages go out in the order they are sent too: Redis queues are first
  in, first out, and on the embedded filesystem broker no two sends share a millisecond.

Tasks are sent once the transaction that queued the run commits (`transaction.on_commit`), so
a worker never looks for a run that is not there yet, and nothing is sent for a rolled-back one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from trainer.config import TINY_MODELS, Config, ConfigError, config_from_dict, expand_matrix
from trainer.offline import offline_reason
from trainer.user_paths import PROBLEMS, is_local_model, outside_user_folders
from webapp import leases
from webapp.experiments.models import Experiment, Run, RunLog
from webapp.runs.checkpoint_refs import start_from_reference
from webapp.runs.name_claims import claim_name
from webapp.runs.warm_start import warm_start_note
from webapp.runs.worker_gpus import check_capacity

log = logging.getLogger(__name__)

EXECUTE_RUN = "workers.tasks.execute_run"
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
        enqueued=timezone.now(),
    )


def _missing_local_model(model: str) -> str | None:
    """Why a local model path cannot be used, or None. Hugging Face ids and the tiny models
    are the worker's to find; a path is checked here, where the web server sees the same
    data directory as the workers, so a typo is named in the form and not hours later."""
    if not is_local_model(model):
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
    if model in TINY_MODELS or is_local_model(model) or "/" not in model:
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


def check_paths(config: dict[str, Any], matrix: dict[str, list]) -> None:
    """ConfigError naming `model` or `dataset` where the raw spec names a path outside the
    data directory's folders a user may name (trainer/user_paths.py). Called before the spec
    is expanded: expanding reads a local model's config.json (the memory estimate), and a
    path outside must get one answer, whether it exists or not."""
    for field, problem_of in PROBLEMS.items():
        for value in [config.get(field), *(matrix.get(field) or [])]:
            if isinstance(value, str) and (problem := problem_of(value, settings.DATA_DIR)):
                raise ConfigError({field: problem})


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
    worker has the GPUs, the device or the memory a run needs. `experiment.warnings` lists
    what to tell the user."""
    check_paths(config or {}, matrix or {})
    configs = expand_matrix(config or {}, matrix or {}, preset or None)
    warnings = check_models(configs)
    warnings += check_capacity(configs, queue_for)  # ConfigError when no live worker can
    if note := warm_start_note(sorted({c.model for c in configs})):
        warnings.append(note)
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


def send_run(run: Run) -> bool:
    """Publish the run's task (`webapp.leases.send`); when the broker cannot be reached the
    run is marked failed (QueueUnavailable) with the reason, so it can be resumed later."""
    return leases.send(RUNS, run)


def add_log(run_id: int, line: str) -> None:
    RunLog.objects.create(run_id=run_id, line=line)


def _failed(error_type: str, message: str) -> dict[str, str]:
    return {"error_type": error_type, "error_message": message}


# Runs trained here are the first kind of leased job (webapp/leases.py).
RUNS = leases.register(
    leases.JobKind(
        name="run",
        model=Run,
        task=EXECUTE_RUN,
        queue=lambda run: run.queue,
        failed=_failed,
        note=add_log,
        scope={"external": False},
        task_id_field="celery_task_id",
        retry_advice="Resume the run once the broker is back.",
    )
)


def cancel_run(run: Run) -> str:
    """Cancel a queued run at once, or ask a running one to stop after its current step
    (`webapp.leases.cancel`); a run logged from elsewhere (external) is cancelled at once.

    Returns the run's status afterwards ("cancelled", "running", or a finished status when
    there was nothing to cancel).
    """
    if run.external and Run.objects.filter(id=run.id, status=Run.RUNNING).update(
        status=Run.CANCELLED, finished=timezone.now(), cancel_requested=True
    ):
        return Run.CANCELLED
    return leases.cancel(RUNS, run.id) or Run.objects.values_list("status", flat=True).get(
        id=run.id
    )


# How running out of memory reads in a run's error: torch's own type on a GPU, the CPU
# allocator's RuntimeError ("DefaultCPUAllocator: not enough memory: you tried to allocate
# 274877906944 bytes"), Python's MemoryError.
OUT_OF_MEMORY_TYPES = ("OutOfMemoryError", "MemoryError")
OUT_OF_MEMORY_WORDS = ("not enough memory", "out of memory")


def resume_problem(run: Run) -> str | None:
    """Why a resume of this failed or cancelled run would fail the same way, in words for its
    page and the API; None when it could succeed (a lost worker, a cancel, an error a
    checkpoint got past)."""
    if run.external or run.status not in (Run.FAILED, Run.CANCELLED):
        return None  # not a question of resuming
    clone = "clone the run with another value"
    if run.error_type in Run.HOPELESS_ERRORS:
        return f"A resume would fail the same way ({run.error_type}): {clone}."
    said = f"{run.error_type} {run.error_message}".lower()
    out_of_memory = run.error_type in OUT_OF_MEMORY_TYPES or any(
        w in said for w in OUT_OF_MEMORY_WORDS
    )
    if out_of_memory and run.checkpoint_step is None:
        return (
            "It ran out of memory before its first checkpoint, and a resume would too: "
            f"{clone} (smaller max_new_tokens, rollout_batch, group_size or micro_batch_size)."
        )
    try:
        config = config_from_dict(run.config)
        if problems := outside_user_folders(config, settings.DATA_DIR):  # an older row's
            raise ConfigError(problems)
        check_capacity([config], queue_for)
    except ConfigError as exc:
        why = "; ".join(exc.errors.values())
        return f"A resume would be refused as a new run would: {why}. Instead, {clone}."
    return None


def resume_run(run: Run) -> bool:
    """Queue a failed or cancelled run again; it continues from its last checkpoint. False
    when it cannot resume (`resume_problem`)."""
    if not run.resumable or resume_problem(run):
        return False
    updated = Run.objects.filter(id=run.id, status__in=(Run.FAILED, Run.CANCELLED)).update(
        status=Run.QUEUED,
        enqueued=timezone.now(),  # a resume asked for joins the back of the queue
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
    a lost node) for longer than TROUPE_STALE_RUN_SECONDS; it resumes from its checkpoint,
    before the runs queued behind it. A run already tried TROUPE_MAX_ATTEMPTS times is marked
    failed (WorkerLost) instead, and a run whose cancel was requested is marked cancelled
    (`webapp.leases.requeue_stale`). Returns the ids queued again."""
    return leases.requeue_stale(RUNS)


def hand_back_runs(worker: str) -> list[int]:
    """Put back in the queue the running runs of `worker`, a worker known to have stopped
    (`webapp.leases.hand_back`): the next start resumes them first. Returns the ids."""
    return leases.hand_back(RUNS, worker)
