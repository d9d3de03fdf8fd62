"""What MLflow knows about a run or an experiment that Troupe's own models do not hold.

An MLflow experiment is a Troupe `Experiment`; an MLflow run is an external Troupe `Run`
(its params are the run's config, its status and times the run's). The rows here add what
MLflow's protocol needs on top: the run's 32-hex id, its tags, user, millisecond times, the
key chosen as its `eval/accuracy`, the aliases the key mapping made
(`webapp/tracking/keymap.py`) and the Troupe keys it logs itself, the datasets it was given
(runs/log-inputs) and the models it logged (runs/outputs); per step the wall-clock time the
client gave its points (MLflow's metric timestamp); and the points a later one replaced at
their step (`EarlierPoint`: MLflow keeps every point).
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


class StepTime(models.Model):
    """The client's timestamp of a run's points at one step (the first given): MLflow's
    metric timestamp. One row a step, not a point: 24 keys logged together share it; a point
    logged at another time has its own in `PointTime`."""

    pk = models.CompositePrimaryKey("run", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    step = models.BigIntegerField()
    timestamp = models.BigIntegerField()


class PointTime(models.Model):
    """A point's own timestamp where it differs from its step's (`StepTime`): an evaluation
    logged at a training step later, a step logged again at another time. Most points share
    their step's time and have no row here."""

    pk = models.CompositePrimaryKey("run", "key", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    key = models.CharField(max_length=METRIC_KEY_MAX)
    step = models.BigIntegerField()
    timestamp = models.BigIntegerField()


class PointSign(models.Model):
    """The sign of a point logged as +inf (1) or -inf (-1). Troupe stores every non-finite
    value as NULL, a gap to its charts and analysis; MLflow's readers get the infinity back
    from here (a NULL with no row is NaN). Only a NULL point's row is read, so a finite value
    logged over an infinity needs no clean-up; a NaN logged over one removes the row."""

    pk = models.CompositePrimaryKey("run", "key", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    key = models.CharField(max_length=METRIC_KEY_MAX)
    step = models.BigIntegerField()
    sign = models.SmallIntegerField()


class EarlierPoint(models.Model):
    """A point an MLflow client logged at a (key, step) where another point, logged later
    (by its timestamp), now stands. MLflow keeps every (key, step, timestamp, value) a
    client sends: ten `log_metric("loss", v)` calls without a step are ten points at step
    0. Troupe's metric table keeps one value a step, the latest, which its pages and
    verdicts read; the others wait here for MLflow's readers (metrics/get-history).
    Non-finite values are `gap` 1 (+inf), -1 (-inf) or 2 (NaN) with `value` 0, so that the
    unique row below drops an exact repeat (a retried batch) whatever the value."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    key = models.CharField(max_length=METRIC_KEY_MAX)
    step = models.BigIntegerField()
    timestamp = models.BigIntegerField()
    value = models.FloatField()
    gap = models.SmallIntegerField(default=0)

    class Meta:
        constraints = [
            # an exact repeat is stored once; run and key lead, so it also serves reading
            # one series' earlier points (get-history) and whether it has any
            models.UniqueConstraint(
                fields=["run", "key", "step", "timestamp", "value", "gap"],
                name="earlier_point_once",
            )
        ]


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
