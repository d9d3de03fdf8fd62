"""Links from the Django pages into the panel, built by `webapp.dashboards.state` so that no
template spells a metric key: `{% load panel %}<a href="{{ run_ids|compare_accuracy }}">`."""

from __future__ import annotations

from django import template

from vocabulary.names import ACCURACY_KEY
from webapp.dashboards.state import compare_url, parse_ids

register = template.Library()


@register.filter
def compare_accuracy(run_ids) -> str:
    """The compare view of these runs' `eval/accuracy`; `run_ids` a run id or "3,7,9"."""
    return compare_url(parse_ids(str(run_ids)), key=ACCURACY_KEY)
