"""MLflow 3's logged models over Troupe's runs: what `mlflow.<flavor>.log_model` and the
Hugging Face `Trainer`'s checkpoint logging (`HF_MLFLOW_LOG_ARTIFACTS=1`) create, upload
into, finalize and look up. A model belongs to the run that made it (`source_run_id`, which
Troupe requires): its owner writes, anyone with a token reads, its files go with the run.

A run Troupe trained also shows its best checkpoint as a model of its own, read-only and never
stored: `m-<run number as 32 hex digits>`, named `troupe-best`, READY, its step and accuracy
as metrics and params, its tag `troupe.checkpoint` the checkpoint's reference (`7:best-40`,
what a branch or `init_from` takes; never a server path). Its artifact URI is an
`mlflow-artifacts:` one like any model's, served from the checkpoint's folder, not a copy
(`artifact_views.py`; the run's own artifacts show the same files under `troupe-best/`):
deleting the run removes it.
"""

from __future__ import annotations

import math
import re
import secrets
from typing import Any

from django.db import transaction

from trainer.checkpoint_index import checkpoint_dir_name, checkpoint_root
from webapp.experiments.models import Run, TrackedRun
from webapp.runs.checkpoints import best_checkpoint
from webapp.tracking import artifacts, search
from webapp.tracking.models import LoggedModel
from webapp.tracking.protocol import INVALID, MISSING, MlflowError
from webapp.tracking.store import find_run, mlflow_run_id, now_ms, to_ms, tracked_of

STATUSES = ("LOGGED_MODEL_PENDING", "LOGGED_MODEL_READY", "LOGGED_MODEL_UPLOAD_FAILED")


def create(
    user,
    *,
    experiment: str,
    run_id: str,
    name: str,
    model_type: str,
    tags: dict[str, str],
    params: dict[str, str],
) -> LoggedModel:
    if not run_id:
        raise MlflowError(
            INVALID,
            "Troupe keeps a logged model with the run that made it: "
            "log it inside a run (source_run_id).",
        )
    run = find_run(user, run_id, manage=True)
    if experiment and experiment != "0" and experiment != str(run.experiment_id):
        raise MlflowError(INVALID, f"Run '{run_id}' is not in experiment '{experiment}'.")
    now = now_ms()
    return LoggedModel.objects.create(
        model_id=f"m-{secrets.token_hex(16)}",
        run=run,
        name=name or f"model-{secrets.token_hex(3)}",
        model_type=model_type,
        created=now,
        updated=now,
        tags=tags,
        params=params,
    )


BEST_NAME = "troupe-best"
_BEST_ID = re.compile(r"m-([0-9a-f]{32})")


def best_model(run: Run) -> LoggedModel | None:
    """The run's best checkpoint as an unsaved, read-only model, or None (an imported or
    MLflow-logged run, no best yet, or its folder gone)."""
    if run.external or not run.checkpoint_dir:
        return None
    best = best_checkpoint(run.id)
    if best is None:
        return None
    folder = checkpoint_root(run.checkpoint_dir) / checkpoint_dir_name("best", best["step"])
    if not folder.is_dir():
        return None
    created = to_ms(run.finished or run.started or run.created) or 0
    # A reference, not the folder: no server path goes to users (docs/security.md), and the
    # reference is what a branch, an init_from or a mix-and-match source takes.
    reference = f"{run.id}:best-{best['step']}"
    params = {"checkpoint_step": str(best["step"]), "checkpoint": reference}
    if best["accuracy"] is not None:
        params["checkpoint_accuracy"] = repr(float(best["accuracy"]))
    model = LoggedModel(
        model_id=f"m-{run.id:032x}",
        run=run,
        name=BEST_NAME,
        model_type="troupe-checkpoint",
        status="LOGGED_MODEL_READY",
        created=created,
        updated=created,
        tags={"troupe.checkpoint": reference, "troupe.read_only": "true"},
        params=params,
    )
    model.best = best  # type: ignore[attr-defined]
    model.best_folder = folder  # type: ignore[attr-defined]
    return model


def _best_of(user, model_id: str, manage: bool) -> LoggedModel | None:
    matched = _BEST_ID.fullmatch(model_id)
    if matched is None:
        return None
    run = Run.objects.filter(id=int(matched.group(1), 16)).first()
    model = best_model(run) if run is not None else None
    if model is None:
        return None
    find_run(user, str(run.id))  # reading is open; the run must still be there
    if manage:
        raise MlflowError(
            INVALID,
            f"Model '{model_id}' is Troupe's best checkpoint of its run: "
            "read-only (log a model of your own to change one).",
        )
    return model


def find(user, model_id: str, *, manage: bool = False) -> LoggedModel:
    model = LoggedModel.objects.filter(model_id=model_id).first()
    if model is None and (best := _best_of(user, model_id, manage)) is not None:
        return best
    if model is None:
        raise MlflowError(MISSING, f"Logged model with ID '{model_id}' not found.")
    model.run = find_run(user, str(model.run_id), manage=manage)
    return model


def finalize(model: LoggedModel, status: str) -> None:
    if status not in STATUSES[1:]:
        raise MlflowError(
            INVALID, f"A model is finalized as one of {', '.join(STATUSES[1:])}, not {status!r}."
        )
    model.status, model.updated = status, now_ms()
    model.save(update_fields=["status", "updated"])


def update(
    model: LoggedModel,
    *,
    tags: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    drop_tag: str | None = None,
) -> None:
    model.tags.update(tags or {})
    model.params.update(params or {})
    if drop_tag is not None:
        if drop_tag not in model.tags:
            raise MlflowError(MISSING, f"No tag with key '{drop_tag}' on model {model.model_id}.")
        del model.tags[drop_tag]
    model.updated = now_ms()
    model.save(update_fields=["tags", "params", "updated"])


ModelLink = tuple[str, str, str]  # (model id, dataset name, dataset digest) of a metric


def model_link(entry: dict, where: str) -> ModelLink | None:
    """The model a logged metric names (`log_metric(…, model_id=…)`), or None."""
    model_id = entry.get("model_id")
    if not model_id:
        return None
    fields = [model_id, entry.get("dataset_name") or "", entry.get("dataset_digest") or ""]
    if not all(isinstance(field, str) and len(field) <= 500 for field in fields):
        raise MlflowError(
            INVALID, f"{where}: model_id, dataset_name and dataset_digest must be strings."
        )
    return fields[0], fields[1], fields[2]


def add_metrics(user, run: Run, linked: list[tuple[Any, ModelLink]]) -> None:
    """Attach logged metrics (each a `store.Point` with its link) to the models they name,
    each point once. Called inside the batch's transaction: a model that does not exist, or
    that the caller may not change, refuses the whole batch."""
    by_model: dict[str, list[dict]] = {}
    for point, (model_id, dataset, digest) in linked:
        # JSON has no NaN or infinity: those are kept as protobuf's JSON spells them.
        value = point.value if math.isfinite(point.value) else str(point.value)
        value = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(value, value)
        entry = {
            "key": point.key,
            "value": value,
            "timestamp": point.timestamp,
            "step": point.step,
            "run_id": mlflow_run_id(run),
        }
        if dataset or digest:
            entry.update(dataset_name=dataset, dataset_digest=digest)
        by_model.setdefault(model_id, []).append(entry)
    for model_id, entries in sorted(by_model.items()):  # one lock order for every writer
        find(user, model_id, manage=True)  # it exists, and is the caller's to change
        model = LoggedModel.objects.select_for_update().get(model_id=model_id)
        model.metrics += [e for e in entries if e not in model.metrics]
        model.updated = now_ms()
        model.save(update_fields=["metrics", "updated"])


def add_outputs(run: Run, outputs: list[dict]) -> None:
    """runs/outputs: remember the models the run logged, each (model, step) once."""
    with transaction.atomic():
        tracked_of(run)  # a run made by Troupe's API gets its row
        tracked = TrackedRun.objects.select_for_update().get(run=run)
        tracked.outputs += [o for o in outputs if o not in tracked.outputs]
        tracked.save(update_fields=["outputs"])


def latest_metric(model: LoggedModel, key: str) -> float | None:
    """A model's value of `key` at its highest (step, timestamp): what a filter compares."""
    found = [m for m in model.metrics if m["key"] == key]
    if not found:
        return None
    return float(max(found, key=lambda m: (m["step"], m["timestamp"]))["value"])


def model_json(model: LoggedModel) -> dict[str, Any]:
    run: Run = model.run
    pairs = lambda d: [{"key": k, "value": v} for k, v in d.items()]  # noqa: E731
    return {
        "info": {
            "model_id": model.model_id,
            "experiment_id": str(run.experiment_id),
            "name": model.name,
            "artifact_uri": artifacts.model_uri(run.experiment_id, model.model_id),
            "creation_timestamp_ms": model.created,
            "last_updated_timestamp_ms": model.updated,
            "status": model.status,
            "model_type": model.model_type,
            "source_run_id": mlflow_run_id(run),
            "tags": pairs(model.tags),
        },
        "data": {"params": pairs(model.params), "metrics": _metrics(model)},
    }


def _metrics(model: LoggedModel) -> list[dict[str, Any]]:
    best = getattr(model, "best", None)
    if best is None:
        return [{**m, "model_id": model.model_id} for m in model.metrics]
    step, run_id = best["step"], mlflow_run_id(model.run)
    found = [{"key": "checkpoint_step", "value": float(step), "step": step}]
    if best["accuracy"] is not None:
        found.append({"key": "accuracy", "value": float(best["accuracy"]), "step": step})
    return [
        {**m, "timestamp": model.created, "run_id": run_id, "model_id": model.model_id}
        for m in found
    ]


def search_models(experiment_ids: list[int], filter_text: str) -> list[LoggedModel]:
    """The experiments' models matching a filter on `name`, `model_id`, `status`,
    `source_run_id`, `tags.`, `params.` or `metrics.` (a model's latest value of the key; the
    client looks a run's model up by name)."""
    attributes = ("name", "model_id", "status", "source_run_id", "model_type")
    clauses = search.parse_filter(filter_text, attributes, ())
    models = LoggedModel.objects.filter(run__experiment_id__in=experiment_ids).select_related(
        "run", "run__tracked"
    )
    found = []
    owned = Run.objects.filter(experiment_id__in=experiment_ids, external=False)
    bests = [m for run in owned.exclude(checkpoint_dir="") if (m := best_model(run))]
    for model in [*bests, *models.order_by("-created")]:
        values = {
            "name": model.name,
            "model_id": model.model_id,
            "status": model.status,
            "source_run_id": mlflow_run_id(model.run),
            "model_type": model.model_type,
        }

        def get(kind: str, name: str, model=model, values=values) -> Any:
            if kind == "attributes":
                return values.get(name)
            if kind == "metrics":
                return latest_metric(model, name)
            return {"tags": model.tags, "params": model.params}.get(kind, {}).get(name)

        if search.matches(clauses, get):
            found.append(model)
    return found
