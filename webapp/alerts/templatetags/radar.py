"""Template tags of the live radar: the run page's Radar panel and the experiment page's column.
They only render: `webapp/alerts/panels.py` reads the alerts (one query a tag)."""

from __future__ import annotations

from django import template

from webapp.alerts import panels
from webapp.runs.verdict_words import event_name

register = template.Library()


@register.simple_tag
def alert_severity() -> str:
    """The alert kinds, worst first, comma-separated: for the experiment page's script."""
    return ",".join(panels.SEVERITY)


@register.simple_tag
def alert_names() -> str:
    """Each kind in words, `kind=words` comma-separated: for the experiment page's script."""
    return ",".join(f"{kind}={event_name(kind)}" for kind in panels.SEVERITY)


@register.inclusion_tag("alerts/_radar.html")
def radar_panel(run) -> dict:
    return panels.radar_panel(run)


@register.simple_tag
def attach_radar(runs) -> str:
    """Give each run `radar` = {"count", "confirmed", "worst"} (None without alerts)."""
    panels.attach_radar(runs)
    return ""
