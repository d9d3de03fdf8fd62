"""MLflow's soft delete on Troupe's pages: which runs and experiments an MLflow client deleted
(`runs/delete`, `experiments/delete`: `webapp/tracking/store.py`), for the lists to leave them
out, and the note a deleted run's or experiment's own page shows (how to restore it, what
removes it for good)."""

from __future__ import annotations

from django import template
from django.db.models import QuerySet

from webapp.experiments.models import Experiment, Run
from webapp.tracking.models import TrackedExperiment, TrackedRun

register = template.Library()


def live_runs(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` less those in MLflow's "deleted" stage."""
    return runs.exclude(tracked__deleted_time__isnull=False)


def live_experiments(experiments: QuerySet[Experiment]) -> QuerySet[Experiment]:
    """`experiments` less those in MLflow's "deleted" stage."""
    return experiments.exclude(tracked__deleted_time__isnull=False)


@register.inclusion_tag("tracking/_deleted_note.html")
def deleted_note(thing: Run | Experiment) -> dict:
    if isinstance(thing, Run):
        row = TrackedRun.objects.filter(run=thing).values("deleted_time", "uuid").first()
        restore = row and f'MlflowClient().restore_run("{row["uuid"]}")'
        kind = "run"
    else:
        row = TrackedExperiment.objects.filter(experiment=thing).values("deleted_time").first()
        restore = f'MlflowClient().restore_experiment("{thing.id}")'
        kind = "experiment"
    deleted = row and row["deleted_time"]
    return {"deleted": deleted, "kind": kind, "restore": restore}
