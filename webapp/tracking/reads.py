"""MLflow's JSON shapes of Troupe's experiments, runs and metric series.

A run's `data.metrics` are the latest point of each key it logged (highest step); the Troupe
aliases the key mapping added are left out, so an MLflow client reads back exactly what it
logged (they stay readable by name through `get-history`). Every run carries two read-only
tags, `troupe.run_id` and `troupe.url`, that say where it is in Troupe. A metric's timestamp
is its own where it differs from its step's (`webapp/metrics/models.PointTime`), else its
step's (`StepTime`); points logged another way have none (0).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from django.urls import reverse

from webapp.experiments.models import Experiment, Run, TrackedExperiment, TrackedRun
from webapp.metrics import latest_with_times
from webapp.tracking import artifacts
from webapp.tracking.store import TO_MLFLOW, to_ms

# MLflow 3.17's server names each experiment's workspace; with workspaces off (Troupe has
# none: experiments belong to their owner) every one is in "default".
WORKSPACE = "default"


def _pairs(mapping: dict[str, Any]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)} for k, v in mapping.items()]


def experiment_json(experiment: Experiment, user) -> dict[str, Any]:
    tracked = TrackedExperiment.objects.filter(experiment=experiment).first()
    mine = tracked is not None and tracked.default_of_id == user.id
    created = to_ms(experiment.created)
    return {
        "experiment_id": "0" if mine else str(experiment.id),
        "name": experiment.name,
        "artifact_location": artifacts.experiment_location(experiment.id),
        "lifecycle_stage": "deleted" if tracked and tracked.deleted_time else "active",
        "creation_time": created,
        "last_update_time": to_ms(tracked.updated) if tracked else created,
        "tags": _pairs(
            {**(tracked.tags if tracked else {}), "troupe.owner": str(experiment.owner)}
        ),
        "workspace": WORKSPACE,
    }


def unmade_default_json() -> dict[str, Any]:
    """Experiment "0" before anything was logged into it: it exists, empty."""
    return {
        "experiment_id": "0",
        "name": "Default",
        "artifact_location": "",
        "lifecycle_stage": "active",
        "workspace": WORKSPACE,
    }


def runs_json(
    runs: Sequence[Run], user, *, metric_keys: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Runs in MLflow's shape, their latest metrics read in one query (of `metric_keys`
    only, when given: what a search filters and sorts on, before it shapes its page)."""
    latest = latest_with_times([run.id for run in runs], metric_keys)
    defaults = set(
        TrackedExperiment.objects.filter(default_of=user).values_list("experiment_id", flat=True)
    )
    return [_run_json(run, latest[run.id], defaults) for run in runs]


def _run_json(run: Run, metrics: list[dict], defaults: set[int]) -> dict[str, Any]:
    try:
        tracked = run.tracked
    except TrackedRun.DoesNotExist:
        tracked = None
    aliases = tracked.aliases if tracked else {}
    run_id = tracked.uuid if tracked else str(run.id)
    start = (tracked.start_time if tracked else None) or to_ms(run.started or run.created)
    end = tracked.end_time if tracked else to_ms(run.finished)
    info = {
        "run_id": run_id,
        "run_uuid": run_id,
        "run_name": run.name,
        "experiment_id": "0" if run.experiment_id in defaults else str(run.experiment_id),
        "user_id": tracked.user_id if tracked else "",
        "status": TO_MLFLOW[run.status],
        "start_time": start,
        "artifact_uri": artifacts.artifact_uri(run, run_id),
        "lifecycle_stage": "deleted" if tracked and tracked.deleted_time else "active",
    }
    if end is not None:
        info["end_time"] = end
    params = tracked.params if tracked else {k: v for k, v in run.config.items()}
    tags = {
        **(tracked.tags if tracked else {"mlflow.runName": run.name}),
        "troupe.run_id": str(run.id),
        "troupe.url": reverse("run_detail", args=[run.id]),
    }
    return {
        "info": info,
        "data": {
            "metrics": [m for m in metrics if m["key"] not in aliases],
            "params": _pairs(params),
            "tags": _pairs(tags),
        },
        "inputs": {"dataset_inputs": tracked.inputs} if tracked and tracked.inputs else {},
        "outputs": {"model_outputs": tracked.outputs} if tracked and tracked.outputs else {},
    }
