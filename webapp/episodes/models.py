"""One recorded episode of a run: a few indexed columns, and the whole record compressed.

The record (`trainer/episode_log.py`: every turn's role, agent, policy, prompt and completion,
token counts, mean log-prob, reward, advantage, truncation) is read whole or not at all, so it
is one zlib-compressed JSON blob (`webapp/episodes/store.py`); the columns are what the API
filters and sorts on.
"""

from __future__ import annotations

from django.db import models

from webapp.experiments.models import Run


class Episode(models.Model):
    TRAIN, EVAL = "train", "eval"
    KINDS = (TRAIN, EVAL)

    # Deleting a run deletes its episodes (Django cascades: one DELETE by run_id). No index of
    # its own: run leads the unique index, which serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    kind = models.CharField(max_length=5, choices=[(k, k) for k in KINDS])
    step = models.IntegerField()
    index = models.IntegerField()  # position in the step's rollout batch (with kind: the key)
    problem_id = models.CharField(max_length=200)
    sample = models.IntegerField()  # rollout index within the problem's GRPO group
    correct = models.BooleanField()
    reward = models.FloatField(null=True)
    turns = models.IntegerField()
    data = models.BinaryField()  # zlib(JSON record)

    class Meta:
        constraints = [
            # A replayed or resumed write stores an episode once (ignore_conflicts on it); it
            # also serves the API's listing: one run's episodes by kind and step, in order.
            models.UniqueConstraint(
                fields=["run", "kind", "step", "index"], name="episode_once_per_slot"
            ),
        ]
        indexes = [
            # one probe problem across a run's evaluations (compare in time)
            models.Index(fields=["run", "problem_id", "step"], name="episode_problem"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.kind}@{self.step} #{self.index}"
