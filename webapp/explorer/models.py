"""What the explorer keeps: each run's verdicts as of its last change (so a filter or a sort
on `cliff_status` or `peak` over thousands of runs reads one row a run, not their points),
each user's chosen columns, and views saved by name.

Tags and notes are not here: they are MLflow's tags (`TrackedRun.tags`,
`TrackedExperiment.tags`, the note under `mlflow.note.content`), written through the MLflow
store so a client's `mlflow.set_tag` and the browser edit one thing.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.experiments.models import Run


class RunVerdict(models.Model):
    """`analysis.runs.summarize_run`'s outcome of a run, stored with the fingerprint of the
    run it was computed from (`verdicts.py`): a row whose fingerprint no longer matches the
    run's is computed again before it is read."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="verdict"
    )
    fingerprint = models.CharField(max_length=200)
    peak = models.FloatField(null=True)
    final = models.FloatField(null=True)
    gain = models.FloatField(null=True)
    cliff_status = models.CharField(max_length=40, blank=True)
    capture = models.CharField(max_length=40, blank=True)  # captured, none, too_few_steps, ""
    amplification = models.CharField(max_length=40, blank=True)  # amplified, none, … or ""


class ColumnChoice(models.Model):
    """The columns a user last chose for the runs table (their order is the table's)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="explorer_columns"
    )
    columns = models.JSONField(default=list)
    updated = models.DateTimeField(auto_now=True)


class SavedView(models.Model):
    """A named table: the query string of the explorer's URL (filter, columns, sort)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="explorer_views"
    )
    name = models.CharField(max_length=100)
    query = models.TextField()  # the URL's query string, e.g. q=…&cols=…&sort=…
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # saving a name again replaces that view (update_or_create on this pair)
            models.UniqueConstraint(fields=["owner", "name"], name="explorer_view_name_once")
        ]


class RunTags(models.Model):
    """Tags and the note (`mlflow.note.content`) of a run trained here, set in the browser.
    An MLflow run's tags live in its `TrackedRun` row, where `mlflow.set_tag` puts them; a
    trained run has no such row (its MLflow reads derive params and times from the run
    itself), so its tags are kept beside it and read with the MLflow run's by the explorer."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="explorer_tags"
    )
    tags = models.JSONField(default=dict)


class SavedChart(models.Model):
    """A chart built in the explorer and kept on an experiment's page (`charts.py`): a metric
    against steps, runs grouped by a field, each group a mean inside a band over seeds."""

    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.CASCADE, related_name="explorer_charts"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=200)
    spec = models.JSONField(default=dict)  # charts.read_spec's result: runs, key, by, …
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]
