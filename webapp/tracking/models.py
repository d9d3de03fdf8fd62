"""What only MLflow's protocol knows: the models a run logged (`LoggedModel`).

An MLflow experiment is a Troupe `Experiment`; an MLflow run is an external Troupe `Run`
(its params are the run's config, its status and times the run's). What MLflow adds to them
that other apps read too lives below this app: the rows beside an experiment and a run
(`TrackedExperiment`, `TrackedRun`) with the models every app builds on
(`webapp/experiments/models.py`), and the points' own rows (their timestamps, infinities and
the points a later one replaced) with the metric store (`webapp/metrics/models.py`).
"""

from __future__ import annotations

from django.db import models

from webapp.experiments.models import Run


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
