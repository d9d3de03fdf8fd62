"""Runs and experiments as JSON-ready dicts: the shape of the API and of the pages' polling."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from webapp.experiments.models import Experiment, Run, RunLog
from webapp.runs.access import can_manage
from webapp.runs.lineage import lineage_json


def _time(value) -> str | None:
    return value.isoformat() if value else None


def run_label(run: Run) -> str:
    if run.name:
        return run.name
    return " · ".join([run.workflow, run.task, run.model, run.sharing, f"seed {run.seed}"])


def run_json(run: Run, detail: bool = False, viewer=None) -> dict[str, Any]:
    data = {
        "id": run.id,
        "experiment": run.experiment_id,
        "name": run.name,
        "label": run_label(run),
        "external": run.external,
        "status": run.status,
        "cell": run.cell,
        "seed": run.seed,
        "queue": run.queue,
        "worker": run.worker,
        "step": run.step,
        "total_steps": run.total_steps,
        "step_words": run.step_words,
        "progress": round(run.progress, 4),
        "phase": run.current_phase,
        "attempts": run.attempts,
        "cancel_requested": run.cancel_requested,
        "created": _time(run.created),
        "started": _time(run.started),
        "finished": _time(run.finished),
        "heartbeat": _time(run.heartbeat),
        "error": {"type": run.error_type, "message": run.error_message} if run.error_type else None,
        "url": reverse("run_detail", args=[run.id]),
        "lineage": lineage_json(run, detail),  # parent, branch_step, intervention; + children
    }
    if detail:
        data["config"] = run.config
        data["config_hash"] = run.config_hash
        data["checkpoint_step"] = run.checkpoint_step
        if data["error"] and viewer is not None and can_manage(viewer, run.experiment):
            # the traceback: its owner and staff only; others read the one-line message
            data["error"]["traceback"] = run.error_traceback
    return data


def experiment_json(experiment: Experiment, runs: list[Run]) -> dict[str, Any]:
    return {
        "id": experiment.id,
        "name": experiment.name,
        "description": experiment.description,
        "owner": experiment.owner.get_username(),
        "preset": experiment.preset or None,
        "config": experiment.base_config,
        "matrix": experiment.matrix,
        "created": _time(experiment.created),
        "url": reverse("experiment_detail", args=[experiment.id]),
        "runs": [run_json(run) for run in runs],
    }


def log_tail(run_id: int, lines: int = 40) -> list[dict[str, str]]:
    """The newest `lines` log lines of a run, oldest first."""
    rows = RunLog.objects.filter(run_id=run_id).order_by("-id").values("created", "line")[:lines]
    return [{"time": _time(r["created"]), "line": r["line"]} for r in reversed(rows)]
