"""`{% load ago %}{{ moment|ago }}`: "3 hours ago", or "just now" under a minute (Django's
`timesince` alone reads "0 minutes ago")."""

from django import template
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(moment) -> str:
    if not moment:
        return ""
    text = timesince(moment)
    return "just now" if text.split("\xa0")[0] == "0" else f"{text} ago"
