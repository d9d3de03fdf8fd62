"""`{% saved_charts experiment %}`: the charts saved on an experiment, for its page
(`webapp/explorer/saved_charts.py` builds them; this tag only renders them)."""

from __future__ import annotations

from django import template

from webapp.explorer import saved_charts as panel

register = template.Library()


@register.inclusion_tag("explorer/_saved_charts.html", takes_context=True)
def saved_charts(context, experiment) -> dict:
    return panel.saved_charts(context["request"], experiment)
