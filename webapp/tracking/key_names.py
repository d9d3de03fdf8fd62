"""The run page's "Troupe names" card: which of the run's keys are Troupe's names copied from
the keys an MLflow client or an imported log used (`webapp/tracking/keymap.py`), and which
Troupe names the run logged itself, so that a key mapping onto one was not copied there
(the client's own values always stand)."""

from __future__ import annotations

from django import template

from webapp.experiments.models import Run, TrackedRun

register = template.Library()


@register.inclusion_tag("tracking/_key_names.html")
def key_names_panel(run: Run) -> dict:
    tracked = TrackedRun.objects.filter(run=run).values("aliases", "shadowed").first() or {}
    return {
        "copied": sorted((tracked.get("aliases") or {}).items()),
        "own": sorted((tracked.get("shadowed") or {}).items()),
    }
