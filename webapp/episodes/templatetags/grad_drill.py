"""`{% grad_drill_panel run %}`: the run page's gradient drill-down
(`webapp/episodes/drill_panel.py` builds it; this tag only renders it)."""

from __future__ import annotations

from django import template

from webapp.episodes import drill_panel

register = template.Library()
register.inclusion_tag("episodes/_grad_drill.html", name="grad_drill_panel")(
    drill_panel.grad_drill_panel
)
