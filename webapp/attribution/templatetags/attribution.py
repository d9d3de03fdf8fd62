"""`{% attribution_panel run manage %}`: the run page's attribution panel
(`webapp/attribution/panel.py` builds it; this tag only renders it)."""

from django import template

from webapp.attribution.panel import panel

register = template.Library()


@register.inclusion_tag("attribution/_panel.html")
def attribution_panel(run, manage: bool) -> dict:
    return panel(run, manage)
