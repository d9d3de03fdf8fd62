"""Experiments, their runs, the runs' metric points and log lines, and API tokens.

An experiment is a spec (a preset, the field values set on top of it, and the matrix axes);
queueing it expands the matrix into runs, each storing its full validated config
(`trainer.config`) and its hash. Metric points are unique on (run, key, step): writing one
again overwrites it, never duplicates it (`webapp/metrics/`).

`TrackedExperiment` and `TrackedRun` add what MLflow's protocol needs on top of an experiment
and a run: the run's 32-hex id, its tags, user, millisecond times, the key chosen as its
`eval/accuracy`, the aliases the key mapping made (`webapp/tracking/keymap.py`) and the Troupe
keys it logs itself, the datasets it was given (runs/log-inputs), the models it logged
(runs/outputs), and MLflow's deleted stage. The tracking app made them, and their tables keep
its names; they live here because the run pages, the name claims of experiments and the
metric store's look-ups read them as well.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

METRIC_KEY_MAX = 250  # characters in a metric key: MLflow's limit, so its clients fit


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    preset = models.CharField(max_length=40, blank=True)
    # The field values set on top of the preset (not the whole config: each run has that).
    base_config = models.JSONField(default=dict)
    matrix = models.JSONField(default=dict)  # {"workflow": [...], "seed": [...], ...}
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            # the experiments list: newest first, one page at a time
            models.Index(fields=["-created"], name="experiment_newest"),
        ]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
    )
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)]
    ACTIVE = (QUEUED, RUNNING)
    FINISHED = (SUCCEEDED, FAILED, CANCELLED)
    # Failures that a resume would only repeat: the run's config names a model or a value
    # that cannot work on this installation. Clone the run with another value instead.
    HOPELESS_ERRORS = ("ModelUnavailable", "ConfigError")

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200, blank=True)
    external = models.BooleanField(default=False)  # logged into through the API, not trained here
    config = models.JSONField(default=dict)
    config_hash = models.CharField(max_length=16, blank=True)
    # The matrix cell, copied out of config for grouping and display.
    workflow = models.CharField(max_length=40, blank=True)
    task = models.CharField(max_length=40, blank=True)
    model = models.CharField(max_length=200, blank=True)
    sharing = models.CharField(max_length=40, blank=True)
    seed = models.IntegerField(default=0)

    status = models.CharField(max_length=12, choices=STATUSES, default=QUEUED)
    queue = models.CharField(max_length=20, blank=True)  # "gpu" or "cpu"; empty when external
    worker = models.CharField(max_length=200, blank=True)  # Celery node name of the last claim
    celery_task_id = models.CharField(max_length=64, blank=True)
    step = models.IntegerField(default=0)  # last finished training step
    total_steps = models.IntegerField(default=0)
    heartbeat = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    error_traceback = models.TextField(blank=True)
    checkpoint_dir = models.CharField(max_length=500, blank=True)
    checkpoint_step = models.IntegerField(null=True, blank=True)  # newest checkpoint written
    # What the worker is doing outside a training step, shown while the run is running
    # ("Preparing model tiny-s: warm start 40%"); empty once the steps begin.
    phase = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # When the run joined the queue: workers claim a queue's runs in this order. A run handed
    # back or swept keeps it, so it resumes before the runs queued behind it.
    enqueued = models.DateTimeField(null=True, blank=True)
    # The step the run had reached when it last resumed from an earlier checkpoint (its
    # progress went back to that checkpoint); NULL when it never went back.
    rewound_from = models.IntegerField(null=True, blank=True)
    # Incremented by every claim. A worker holds the run only while `attempts` still has the
    # value its claim set, so a worker that was presumed dead cannot overwrite a newer attempt.
    attempts = models.IntegerField(default=0)
    # When the live radar's queued evaluation of this run is due (`webapp/alerts/radar.py`);
    # NULL when none is queued. Setting it with a conditional UPDATE is what lets a burst of
    # writes, from any number of processes, queue one evaluation.
    radar_due = models.DateTimeField(null=True, blank=True)
    # Lineage: a branch starts from a checkpoint of `parent` taken after
    # `branch_step` and changes the config fields in `intervention` ({} for a control
    # continuation, which changes nothing). Deleting the parent keeps its branches.
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    branch_step = models.IntegerField(null=True, blank=True)
    intervention = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # the stale-heartbeat sweep: running runs whose heartbeat is older than a cutoff
            models.Index(fields=["status", "heartbeat"], name="run_status_heartbeat"),
        ]

    def __str__(self) -> str:
        return self.name or f"run {self.pk}"

    @property
    def progress(self) -> float:
        if self.status == self.SUCCEEDED:
            return 1.0
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def resumable(self) -> bool:
        """Failed or cancelled, trained here, and not failed for a reason a resume repeats."""
        return (
            not self.external
            and self.status in (self.FAILED, self.CANCELLED)
            and self.error_type not in self.HOPELESS_ERRORS
        )

    @property
    def percent(self) -> int:
        return round(100 * self.progress)

    @property
    def step_count(self) -> str:
        """ "49/500"; "49" when the run's length is unknown (0: an imported run, an MLflow run
        whose length came as a tag), never "49/0"."""
        return f"{self.step}/{self.total_steps}" if self.total_steps > 0 else str(self.step)

    @property
    def step_words(self) -> str:
        """ "step 49 of 500" ("step 49" when the length is unknown), and while a resume from an
        earlier checkpoint trains steps again, that it does: its progress went back."""
        words = f"step {self.step} of {self.total_steps}" if self.total_steps > 0 else ""
        words = words or f"step {self.step}"
        if self.rewound_from is not None and self.step < self.rewound_from:
            words += (
                f" (resumed from an earlier checkpoint: it had reached step "
                f"{self.rewound_from}, and trains the steps after the checkpoint again)"
            )
        return words

    @property
    def current_phase(self) -> str:
        """The phase to show: only a running run is doing something."""
        return self.phase if self.status == self.RUNNING else ""

    @property
    def cell(self) -> dict[str, str]:
        return {
            "workflow": self.workflow,
            "task": self.task,
            "model": self.model,
            "sharing": self.sharing,
        }


class MetricPoint(models.Model):
    # The key of the table is (run, key, step): one index serves the idempotent upsert
    # (ON CONFLICT target), reading one run's series in (key, step) order and the latest
    # value of each key. No surrogate id: a second index would only slow ingestion down.
    pk = models.CompositePrimaryKey("run", "key", "step")
    # No index of its own: run_id leads the primary key, which serves every lookup by run.
    # No constraint in the database either: its check is a lookup of the run for every row
    # inserted, a third of a metric batch's insert time (measured), and every
    # writer has just read the run it writes to. Deleting a run still deletes its points
    # (Django cascades, one DELETE by run_id).
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="points", db_index=False, db_constraint=False
    )
    # MLflow's limits: keys of up to 250 characters, steps any 64-bit integer.
    key = models.CharField(max_length=METRIC_KEY_MAX)
    step = models.BigIntegerField()
    value = models.FloatField(null=True)  # null: NaN/inf, which JSON has no spelling for

    def __str__(self) -> str:
        return f"{self.key}@{self.step}={self.value}"


class RunLog(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="logs", db_index=False)
    created = models.DateTimeField(auto_now_add=True)
    line = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [
            # the run page's log tail: the newest lines of one run
            models.Index(fields=["run", "-id"], name="runlog_tail"),
        ]


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token; only its SHA-256 is stored, the raw value is shown once at creation."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12)  # shown on the account page to tell tokens apart
    digest = models.CharField(max_length=64, unique=True)  # the bearer lookup: WHERE digest = …
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @classmethod
    def issue(cls, user, name: str = "") -> tuple[ApiToken, str]:
        raw = "trp_" + secrets.token_urlsafe(30)
        token = cls.objects.create(user=user, name=name, prefix=raw[:10], digest=hash_token(raw))
        return token, raw


class Alert(models.Model):
    """One live-radar event of a run (`analysis/radar.py`), kept as the radar last said it.

    Unique on (run, kind, role, step): evaluating the radar again after more points updates a
    row (a provisional cliff becoming confirmed) instead of adding one (`alerts.py`). A
    provisional event the radar stops reporting (the run recovered, or ended without
    confirming it) is kept, `retracted` with when and why, not deleted: a reader who saw it
    learns where it went.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts", db_index=False)
    kind = models.CharField(max_length=40)  # cliff, amplification, capture, entropy_collapse …
    role = models.CharField(max_length=200, blank=True)  # "" for run-wide kinds
    key = models.CharField(max_length=METRIC_KEY_MAX)  # the metric the event was read from
    step = models.BigIntegerField()  # where it happened
    seen_at = models.BigIntegerField()  # the step whose point made it known (confirmed)
    provisional = models.BooleanField(default=False)
    value = models.FloatField(null=True)
    limit = models.FloatField(null=True)
    created = models.DateTimeField(auto_now_add=True)
    # Set when the event was handed to the webhook (or found confirmed with none set): the
    # conditional UPDATE that sets it is what makes a delivery happen once.
    notified = models.DateTimeField(null=True, blank=True)
    # When the radar stopped reporting a provisional event, and why in words; None while the
    # radar reports it (a retracted event it reports again is current again).
    retracted = models.DateTimeField(null=True, blank=True)
    retraction = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            # the upsert's conflict target; run_id leads, so it also serves one run's alerts
            models.UniqueConstraint(
                fields=["run", "kind", "role", "step"], name="alert_unique_event"
            ),
        ]
        indexes = [
            # the alerts page and API: the newest events across runs
            models.Index(fields=["-created", "-id"], name="alert_newest"),
        ]

    def __str__(self) -> str:
        role = f" {self.role}" if self.role else ""
        return f"{self.kind}{role} @{self.step} (run {self.run_id})"


class WorkerSeen(models.Model):
    """A worker's last word on how many GPUs it can give one run (webapp/runs/
    worker_gpus.py): written by the worker at start-up and with every stale-run sweep."""

    name = models.CharField(max_length=200, unique=True)  # Celery's node name, name@host
    gpus = models.PositiveIntegerField()  # TROUPE_WORKER_GPUS
    gpu_memory_gb = models.FloatField(null=True, blank=True)  # each GPU's; NULL: no GPU
    memory_gb = models.FloatField(null=True, blank=True)  # the host's RAM; NULL: unknown
    seen = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.gpus} GPU(s)"


class TrackedExperiment(models.Model):
    """What MLflow's protocol knows of an experiment beyond Troupe's own row: its name among
    its owner's MLflow experiments (which Troupe's own pages claim too), tags, deleted stage."""

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
        db_table = "tracking_trackedexperiment"
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="mlflow_name_unique_per_owner")
        ]


class TrackedRun(models.Model):
    """What MLflow's protocol knows of a run beyond Troupe's own row (the tracking app's pages
    and the metric store's look-ups read it, the run pages its deleted stage)."""

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

    class Meta:
        db_table = "tracking_trackedrun"
