"""Experiments, their runs, the runs' metric points and log lines, and API tokens.

An experiment is a spec (one base config plus matrix axes); queueing it expands the matrix
into runs, each storing its full validated config (`trainer.config`) and its hash. Metric
points are unique on (run, key, step): writing one again overwrites it, never duplicates it.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    preset = models.CharField(max_length=40, blank=True)
    base_config = models.JSONField(default=dict)  # field values as the user set them
    matrix = models.JSONField(default=dict)  # {"workflow": [...], "seed": [...], ...}
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
        "queued", "running", "succeeded", "failed", "cancelled",
    )
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)]
    FINISHED = (SUCCEEDED, FAILED, CANCELLED)

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200, blank=True)
    external = models.BooleanField(default=False)  # logged into through the API, not trained here
    config = models.JSONField(default=dict)
    config_hash = models.CharField(max_length=16, blank=True)
    # The matrix cell, denormalised from config for filtering and grouping.
    workflow = models.CharField(max_length=40, blank=True)
    task = models.CharField(max_length=40, blank=True)
    model = models.CharField(max_length=200, blank=True)
    sharing = models.CharField(max_length=40, blank=True)
    seed = models.IntegerField(default=0)

    status = models.CharField(max_length=12, choices=STATUSES, default=QUEUED)
    queue = models.CharField(max_length=20, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    step = models.IntegerField(default=0)
    total_steps = models.IntegerField(default=0)
    heartbeat = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    error_traceback = models.TextField(blank=True)
    checkpoint_dir = models.CharField(max_length=500, blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.IntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # the stale-heartbeat sweep: running runs whose heartbeat is old
            models.Index(fields=["status", "heartbeat"]),
        ]

    def __str__(self) -> str:
        return self.name or f"run {self.pk}"

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


class MetricPoint(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="points")
    key = models.CharField(max_length=200)
    step = models.IntegerField()
    value = models.FloatField(null=True)  # null: NaN/inf, which JSON and Postgres floats dislike

    class Meta:
        constraints = [
            # idempotent writes (ON CONFLICT target) and reading one series in step order
            models.UniqueConstraint(fields=["run", "key", "step"], name="metric_point_unique"),
        ]


class RunLog(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="logs")
    created = models.DateTimeField(auto_now_add=True)
    line = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [
            # the run page's log tail: newest lines of one run
            models.Index(fields=["run", "-id"]),
        ]


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token; only its SHA-256 is stored, the raw value is shown once at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12)  # shown in the account page to tell tokens apart
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    @classmethod
    def issue(cls, user, name: str = "") -> tuple["ApiToken", str]:
        raw = "trp_" + secrets.token_urlsafe(30)
        token = cls.objects.create(user=user, name=name, prefix=raw[:10], digest=hash_token(raw))
        return token, raw
