"""A swap job: mix-and-match evaluations of one run, and the attribution they add up to.

A job is queued from the run page or the API, run by a worker (`workers/attribution.py`) and
kept with the run (deleted with it). `plan` lists the evaluations, each `{"key", "sources":
{role: source}, "reuse_step"}` (`reuse_step`: the run's own evaluation of that step stands
for it, `webapp/attribution/planning.py`); `evaluations` fills in as the worker goes, each
key → `{"accuracy", "per_problem", "seconds", "reused_step"}`, per-problem accuracies kept so
every comparison stays paired; `result` is `analysis.attribution.attribute`'s answer (gain and
cliff jobs; a `mix` job is one evaluation and has none).

A running job's worker beats (`heartbeat`); the stale-run sweep queues a job whose worker
stopped beating again, and the next attempt evaluates only what the last one did not store
(`attempts` is the worker's lease, as a run's; past TROUPE_MAX_ATTEMPTS the job fails).
"""

from __future__ import annotations

from django.db import models

from webapp.experiments.models import Run


class SwapJob(models.Model):
    # A run's statuses: both are held by one lease (webapp/leases.py), which reads them so.
    QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
        Run.QUEUED,
        Run.RUNNING,
        Run.SUCCEEDED,
        Run.FAILED,
        Run.CANCELLED,
    )
    STATUSES = Run.STATUSES
    ACTIVE = (QUEUED, RUNNING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="swap_jobs")
    kind = models.CharField(max_length=20)  # planning.KINDS, or "mix"
    status = models.CharField(max_length=20, choices=STATUSES, default=QUEUED)
    plan = models.JSONField(default=dict)
    evaluations = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)  # the worker stops at its next step
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # the run page's panel and the API list: a run's jobs, newest first
            models.Index(fields=["run", "-id"], name="swapjob_run_newest"),
        ]

    @property
    def done(self) -> int:
        return len(self.evaluations)

    @property
    def total(self) -> int:
        return len(self.plan.get("evaluations", []))

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "run": self.run_id,
            "kind": self.kind,
            "status": self.status,
            "plan": self.plan,
            "evaluations": self.evaluations,
            "result": self.result,
            "error": self.error,
            "created": self.created.isoformat() if self.created else None,
            "finished": self.finished.isoformat() if self.finished else None,
        }
