"""The verdicts in words as template filters: each is a function of `webapp.runs.verdict_words`,
which views call directly; a template tag module holds no logic of its own."""

from __future__ import annotations

from django import template

from webapp.runs import verdict_words

register = template.Library()

for _name in ("line_number", "cliff_label", "cliff_line", "capture_label", "event_name"):
    register.filter(_name, getattr(verdict_words, _name))
