"""The metric store's own tables beside Django's `MetricPoint` (in the experiments app): the
client's timestamp of a run's points per step (`StepTime`) and per point where it differs
(`PointTime`), the sign of a point logged as an infinity (`PointSign`), and the points a later
one replaced at their step (`EarlierPoint`). MLflow's protocol reads them, but the store alone
writes and reads them (`webapp/metrics/tables.py`), so they live here.

The tables keep the names they had in the tracking app, where they were made: the move was one
of Django's state only, and no row was copied.
"""

from __future__ import annotations

from django.db import models

from webapp.experiments.models import METRIC_KEY_MAX, Run


class StepTime(models.Model):
    """The client's timestamp of a run's points at one step (the first given): MLflow's
    metric timestamp. One row a step, not a point: 24 keys logged together share it; a point
    logged at another time has its own in `PointTime`."""

    pk = models.CompositePrimaryKey("run", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    step = models.BigIntegerField()
    timestamp = models.BigIntegerField()

    class Meta:
        db_table = "tracking_steptime"


class PointTime(models.Model):
    """A point's own timestamp where it differs from its step's (`StepTime`): an evaluation
    logged at a training step later, a step logged again at another time. Most points share
    their step's time and have no row here."""

    pk = models.CompositePrimaryKey("run", "key", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, related_name="+")
    key = models.CharField(max_length=METRIC_KEY_MAX)
    step = models.BigIntegerField()
    timestamp = models.BigIntegerField()

    class Meta:
        db_table = "tracking_pointtime"


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

    class Meta:
        db_table = "tracking_pointsign"


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
        db_table = "tracking_earlierpoint"
        constraints = [
            # an exact repeat is stored once; run and key lead, so it also serves reading
            # one series' earlier points (get-history) and whether it has any
            models.UniqueConstraint(
                fields=["run", "key", "step", "timestamp", "value", "gap"],
                name="earlier_point_once",
            )
        ]
