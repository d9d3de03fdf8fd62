"""What MLflow knows about a run or an experiment that Troupe's own models do not hold.

An MLflow experiment is a Troupe `Experiment`; an MLflow run is an external Troupe `Run`
(its params are the run's config, its status and times the run's). The rows here add what
MLflow's protocol needs on top: the run's 32-hex id, its tags, user, millisecond times, the
key chosen as its `eval/accuracy`, the aliases the key mapping made
(`webapp/tracking/keymap.py`) and the Troupe keys it logs itself, the datasets it was given
(runs/log-inputs) and the models it logged (runs/outputs). The points' own rows that MLflow
reads (their timestamps, infinities and the points a later one replaced) are the metric
store's, in `webapp/metrics/models.py`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.experiments.models import METRIC_KEY_MAX, Experiment, Run


class TrackedExperiment(models.Model):
    experiment = models.OneToOneField(
        Experiment, on_delete=models.CASCADE, primary_key=True, related_name="tracked"
    )
    # The owner's MLflow experiment "0" ("Default"): each user has their own.
    default_of = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="default_mlflow_experiment",
    )
    # The name this experiment holds among its owner's MLflow experiments. The database keeps
    # it unique, so of two clients that create one name at once, one gets the experiment and
    # the other RESOURCE_ALREADY_EXISTS (a check before the insert cannot: both pass it).
    # NULL for an experiment made before the constraint whose name an older one already held.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, related_name="+"
    )
    name = models.CharField(max_length=200, null=True)
    tags = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)
    # When `experiments/delete` put it in MLflow's "deleted" stage (ms); NULL while active.
    # It keeps its name and runs until restored, or purged (`manage.py purge_deleted`).
    deleted_time = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="mlflow_name_unique_per_owner")
        ]


class TrackedRun(models.Model):
    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="tracked"
    )
    uuid = models.CharField(max_length=32, unique=True)  # the MLflow run_id: WHERE uuid = …
    user_id = models.CharField(max_length=200, blank=True)
    start_time = models.BigIntegerField(null=True)  # ms since the epoch, as the client gave it
    end_time = models.BigIntegerField(null=True)
    tags = models.JSONField(default=dict)
    params = models.JSONField(default=dict)
    # The key whose values are also stored as eval/accuracy (chosen once, then kept).
    accuracy_key = models.CharField(max_length=METRIC_KEY_MAX, blank=True)
    aliases = models.JSONField(default=dict)  # {Troupe key: the original key it copies}
    # {Troupe key: the original key that maps onto it} where the client logs the Troupe key
    # itself: its own values stand and the original is not copied there.
    shadowed = models.JSONField(default=dict)
    # runs/log-inputs: [{"tags": [...], "dataset": {name, digest, source_type, source, …}}],
    # one entry per (name, digest), as MLflow's store keeps them.
    inputs = models.JSONField(default=list)
    # runs/outputs: [{"model_id", "step"}], the models the run logged (`run.outputs`).
    outputs = models.JSONField(default=list)
    # When `runs/delete` (or its experiment's delete) put it in MLflow's "deleted" stage (ms);
    # NULL while active. Its points and files stay until restored or purged.
    deleted_time = models.BigIntegerField(null=True, blank=True)
    # The param and tag values cut at MLflow's limits, as MLflow's server cuts them:
    # {"params": {key: characters sent}, "tags": {…}}; the run page marks them.
    cut = models.JSONField(default=dict)


class LoggedModel(models.Model):
    """An MLflow 3 logged model (`mlflow.<flavor>.log_model`, a Hugging Face checkpoint). Troupe
    keeps one only with the run that made it: its files lie in the run's directory, so they go
    when the run goes."""

    model_id = models.CharField(max_length=40, primary_key=True)  # "m-<32 hex>", as MLflow's
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=250)
    model_type = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=40, default="LOGGED_MODEL_PENDING")
    created = models.BigIntegerField()  # ms since the epoch
    updated = models.BigIntegerField()
    tags = models.JSONField(default=dict)
    params = models.JSONField(default=dict)
    # Metrics logged with this model's id (`log_metric(…, model_id=…)`): [{"key", "value",
    # "timestamp", "step", "run_id", "dataset_name"?, "dataset_digest"?}], each once.
    metrics = models.JSONField(default=list)

    class Meta:
        indexes = [
            # logged-models/search by experiment and name (the client's look-up of a run's model)
            models.Index(fields=["run", "name"], name="logged_model_run_name"),
        ]
