"""The run page's episode panel: one step's recorded episodes, server-rendered.

The step and kind come from the page's query (`?episodes_at=eval:12`); a value that cannot
be read, or names a step without episodes, falls back to the latest recorded step with a
note, never an error. Each episode is a folded block with its turns; a completion longer
than `FOLD_CHARS` shows its start and folds the rest. Every text goes through the
template's escaping, so a completion holding HTML is shown as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template

from webapp.episodes.models import Episode
from webapp.episodes.store import Filters, records, select
from webapp.experiments.models import Run

register = template.Library()

FOLD_CHARS = 600  # characters of a long text shown before the fold
SHOWN = 64  # episodes of one step shown (a step records 2 problems × 8 by default)


@dataclass(frozen=True)
class Text:
    head: str
    rest: str  # "" when the text fits before the fold


def folded(text: str | None) -> Text:
    text = text or ""
    return Text(text[:FOLD_CHARS], text[FOLD_CHARS:])


def _turn(turn: dict[str, Any]) -> dict[str, Any]:
    return {
        **turn,
        "prompt": folded(turn.get("prompt")),
        "completion": folded(turn.get("completion")),
    }


def _chosen(query, recorded: list[tuple[str, int]]) -> tuple[tuple[str, int] | None, str]:
    """(kind, step) to show and a note when the query asked for something not recorded."""
    latest = recorded[-1] if recorded else None
    raw = query.get("episodes_at")
    if raw is None:
        return latest, ""
    kind, _, step = raw.partition(":")
    if kind not in Episode.KINDS or not step.isdigit() or len(step) > 10:
        return latest, "That step could not be read; showing the latest."
    if (kind, int(step)) not in recorded:
        return latest, f"No {kind} episodes were recorded at step {int(step)}; showing the latest."
    return (kind, int(step)), ""


@register.inclusion_tag("episodes/_episodes.html", takes_context=True)
def episode_panel(context, run: Run) -> dict:
    request = context.get("request")
    query = request.GET if request is not None else {}
    steps = Episode.objects.filter(run_id=run.id).values_list("kind", "step").distinct()
    recorded = sorted(steps.order_by(), key=lambda pair: (pair[1], pair[0]))
    chosen, note = _chosen(query, recorded)
    shown = []
    if chosen is not None:
        rows = select(run.id, Filters(kind=chosen[0], step=chosen[1]))[:SHOWN]
        shown = [{**r, "turns": [_turn(t) for t in r["turns"]]} for r in records(rows)]
    return {
        "run": run,
        "recorded": [{"kind": k, "step": s, "value": f"{k}:{s}"} for k, s in recorded],
        "chosen": chosen,
        "note": note,
        "episodes": shown,
    }
