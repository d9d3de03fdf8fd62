"""The run page's episode panel: what the run recorded, and the ways into the episode pages
(`webapp/episodes/page_views.py`): a step picker, the latest step, a probe problem in time,
the same problem beside another run. A click on the page's sparklines opens the episodes of
the clicked step (static/episode_links.js, loaded with the panel).
"""

from __future__ import annotations

from django import template

from webapp.episodes.browse import KIND_NAMES
from webapp.episodes.models import Episode
from webapp.episodes.store import counts, recorded_steps
from webapp.experiments.models import Run

register = template.Library()


@register.inclusion_tag("episodes/_episodes.html")
def episode_panel(run: Run) -> dict:
    recorded = recorded_steps(run.id)
    recorded_counts = counts(run.id)
    return {
        "run": run,
        "recorded": [
            {"kind": k, "step": s, "label": f"{s} · {KIND_NAMES[k]}"} for k, s in recorded
        ],
        "latest": recorded[-1] if recorded else None,
        "train_count": recorded_counts.get(Episode.TRAIN, 0),
        "eval_count": recorded_counts.get(Episode.EVAL, 0),
    }
