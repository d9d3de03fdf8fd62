"""`{% load run_notes %}{% run_notes_card run %}`: the run page's note (rendered Markdown) and
tags, where the run has any, with a link to change them on the run's tags-and-note page."""

from django import template

from webapp.explorer import tags as store
from webapp.explorer.notes import render_note

register = template.Library()


@register.inclusion_tag("explorer/_run_notes_card.html")
def run_notes_card(run):
    tags = store.run_tags(run)
    note = tags.get(store.NOTE_TAG, "")
    return {
        "run": run,
        "note_html": render_note(note) if note else "",
        "tags": sorted((k, v) for k, v in tags.items() if k != store.NOTE_TAG),
    }
