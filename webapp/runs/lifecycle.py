"""MLflow's soft delete on Troupe's pages: which runs and experiments an MLflow client deleted
(`runs/delete`, `experiments/delete`: `webapp/tracking/store.py`), for the lists to leave them
out, and the note a deleted run's or experiment's own page shows (how to restore it, what
removes it for good).

This is the one definition of "deleted" every reader's view uses: the experiment list and
page, the statistics, the panel's pickers and comparisons, the API's lists and many-run series,
the alerts and a run's branches leave out what `live_runs` / `live_experiments` / `live_run`
drop, as MLflow's UI hides deleted runs. A deleted run's or experiment's own page and its
`GET` still answer (with the note), so it can be restored; MLflow's own endpoints filter by
their `view_type` instead."""

from __future__ import annotations

from django import template
from django.db.models import Q, QuerySet

from webapp.experiments.models import Experiment, Run, TrackedExperiment, TrackedRun

register = template.Library()


def _not_deleted(path: str) -> Q:
    """The run or experiment at `path` is not in MLflow's "deleted" stage: its MLflow row says
    so, or it has none (made on Troupe's pages and never deleted: no row, NULL here)."""
    return Q(**{f"{path}tracked__deleted_time__isnull": True})


def live_run(path: str = "") -> Q:
    """The condition that the run at `path` ("" for a `Run` query, "run__" from an `Alert`,
    "runs__" inside an experiment's aggregate) is live: neither it nor its experiment is
    deleted. The experiment too: deleting one marks its runs, but not a run made in it later
    on Troupe's pages (a branch of one of its runs, a seed its statistics page queued)."""
    return _not_deleted(path) & _not_deleted(f"{path}experiment__")


def live_runs(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` less those in MLflow's "deleted" stage, or in an experiment that is."""
    return runs.filter(live_run())


def live_experiments(experiments: QuerySet[Experiment]) -> QuerySet[Experiment]:
    """`experiments` less those in MLflow's "deleted" stage."""
    return experiments.filter(_not_deleted(""))


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
