"""The live radar's panels: the run page's Radar panel and the experiment page's radar column,
read with one query each so that the template tags (templatetags/radar.py) only render.
Tags rather than view code bring them to the pages, so that the run and experiment views (a
floor below the alerts app) stay as they are.
"""

from __future__ import annotations

from vocabulary.names import ALERT_KINDS
from webapp.experiments.models import Alert, Run
from webapp.runs.checkpoints import best_checkpoint

# The worst event of a run comes first (the vocabulary's order); experiment_radar.js ranks by
# the same list, which the experiment page hands it (`alert_severity`).
SEVERITY = ALERT_KINDS


def _rank(alert: Alert) -> tuple:
    kind = SEVERITY.index(alert.kind) if alert.kind in SEVERITY else len(SEVERITY)
    return (alert.provisional, kind, alert.step)


def radar_panel(run: Run) -> dict:
    """The run page's Radar panel: current alerts, how many were retracted, the best checkpoint."""
    shown = Alert.objects.filter(run_id=run.id).order_by("step", "kind", "role")
    alerts = [a for a in shown if a.retracted is None]
    return {
        "run": run,
        "alerts": alerts,
        "retracted": sum(a.retracted is not None for a in shown),
        "best": best_checkpoint(run.id),
        "active": run.status in Run.ACTIVE,
    }


def attach_radar(runs) -> None:
    """Give each run `radar` = {"count", "confirmed", "worst"} (None without alerts): every
    run's current alerts in one query, never one query a run."""
    by_run: dict[int, list[Alert]] = {}
    current = Alert.objects.filter(run_id__in=[run.id for run in runs], retracted__isnull=True)
    for alert in current:
        by_run.setdefault(alert.run_id, []).append(alert)
    for run in runs:
        alerts = by_run.get(run.id)
        run.radar = (
            {
                "count": len(alerts),
                "confirmed": sum(not a.provisional for a in alerts),
                "worst": min(alerts, key=_rank),
            }
            if alerts
            else None
        )
