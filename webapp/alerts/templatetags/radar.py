"""Template tags of the live radar: the run page's Radar panel and the experiment page's column.

Tags rather than view code, so that the run and experiment views stay as they are: each tag
makes one query (the panel: the run's alerts and its best checkpoint; the column: every
run's alerts at once, never one query a run).
"""

from __future__ import annotations

from django import template

from vocabulary.names import ALERT_KINDS
from webapp.experiments.models import Alert, Run
from webapp.runs.checkpoints import best_checkpoint

register = template.Library()

# The worst event of a run comes first (the vocabulary's order); experiment_radar.js ranks by
# the same list, which the experiment page hands it (`alert_severity`).
SEVERITY = ALERT_KINDS


@register.simple_tag
def alert_severity() -> str:
    """The alert kinds, worst first, comma-separated: for the page's script."""
    return ",".join(SEVERITY)


def _rank(alert: Alert) -> tuple:
    kind = SEVERITY.index(alert.kind) if alert.kind in SEVERITY else len(SEVERITY)
    return (alert.provisional, kind, alert.step)


@register.inclusion_tag("alerts/_radar.html")
def radar_panel(run: Run) -> dict:
    shown = Alert.objects.filter(run_id=run.id).order_by("step", "kind", "role")
    alerts = [a for a in shown if a.retracted is None]
    return {
        "run": run,
        "alerts": alerts,
        "retracted": sum(a.retracted is not None for a in shown),
        "best": best_checkpoint(run.id),
        "active": run.status in Run.ACTIVE,
    }


@register.simple_tag
def attach_radar(runs) -> str:
    """Give each run `radar` = {"count", "confirmed", "worst"} (None without alerts)."""
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
    return ""
