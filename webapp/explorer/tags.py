"""Reading and writing the tags (and the Markdown note, MLflow's `mlflow.note.content` tag) of
a run or an experiment, one way for the browser and MLflow's clients.

An MLflow run's tags go through the MLflow store (`webapp.tracking.store.log_batch`, the
path `mlflow.set_tag` takes, and `delete_tag`); a trained run's into `RunTags` (see its
docstring); an experiment's into its `TrackedExperiment` row through the store's
`set_experiment_tag`. Keys and values are checked as MLflow checks them."""

from __future__ import annotations

from django.db import transaction

from webapp.experiments.models import Experiment, Run, TrackedExperiment, TrackedRun
from webapp.explorer.models import RunTags
from webapp.tracking import store
from webapp.tracking.protocol import MlflowError

NOTE_TAG = "mlflow.note.content"  # MLflow's own: its UI shows it as the run's description


class TagError(ValueError):
    """A tag the store refused; the message says why."""


def run_tags(run: Run) -> dict[str, str]:
    if run.external:
        found = TrackedRun.objects.filter(run=run).values_list("tags", flat=True).first()
    else:
        found = RunTags.objects.filter(run=run).values_list("tags", flat=True).first()
    return dict(found or {})


def experiment_tags(experiment: Experiment) -> dict[str, str]:
    found = (
        TrackedExperiment.objects.filter(experiment=experiment)
        .values_list("tags", flat=True)
        .first()
    )
    return dict(found or {})


def _checked(key: str, value: str) -> tuple[str, str]:
    try:
        ((key, value),) = store.checked_tags([{"key": key, "value": value}]).items()
    except MlflowError as error:
        raise TagError(error.message) from None
    return key, value


def set_run_tag(run: Run, key: str, value: str) -> None:
    key, value = _checked(key, value)
    if run.external:
        store.log_batch(run, [], {}, {key: value})
        return
    with transaction.atomic():
        row, _ = RunTags.objects.select_for_update().get_or_create(run=run)
        row.tags[key] = value
        row.save(update_fields=["tags"])


def delete_run_tag(run: Run, key: str) -> None:
    if run.external:
        try:
            store.delete_tag(run, key)
        except (MlflowError, TrackedRun.DoesNotExist):
            pass  # already gone: the form's outcome is the same
        return
    with transaction.atomic():
        row = RunTags.objects.select_for_update().filter(run=run).first()
        if row is not None and row.tags.pop(key, None) is not None:
            row.save(update_fields=["tags"])


def set_experiment_tag(experiment: Experiment, key: str, value: str) -> None:
    key, value = _checked(key, value)
    store.set_experiment_tag(experiment, key, value)


def delete_experiment_tag(experiment: Experiment, key: str) -> None:
    with transaction.atomic():
        row = TrackedExperiment.objects.select_for_update().filter(experiment=experiment).first()
        if row is not None and row.tags.pop(key, None) is not None:
            row.save(update_fields=["tags", "updated"])
