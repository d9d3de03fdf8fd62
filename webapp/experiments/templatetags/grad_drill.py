"""The run page's gradient drill-down: per role, the recorded steps where its gradient norm
was largest, each linked to that step's episodes ordered by their share of the role's
gradient (`grad_share`, trainer/grad_drill.py; recorded with `episodes_grad_share`).

From a spike of `role/<r>/grad_norm` a researcher wants the episodes that drove it: only
training steps with recorded episodes can answer, so the spikes offered are the largest norms
among those steps. A tag, so the run view stays as it is: three queries (the recorded steps,
the latest step's records, each role's norms at those steps).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import template

from trainer.names import role_key
from webapp.episodes.codec import unpack
from webapp.episodes.models import Episode
from webapp.experiments.models import Run
from webapp.metrics import values_at

register = template.Library()

SPIKES = 3  # steps offered per role


def episodes_by_share(run_id: int, step: int, role: str) -> dict[str, str]:
    """The episode view of one step ordered by `role`'s share, and the same from the API."""
    view = urlencode({"kind": "train", "step": step, "sort": f"share:{role}"})
    api = urlencode({"kind": "train", "step": step, "order": f"grad_share:{role}"})
    return {
        "view": f"/runs/{run_id}/episodes/?{view}",
        "api": f"/api/v1/runs/{run_id}/episodes?{api}",
    }


def drill_roles(run_id: int) -> tuple[list[int], list[str] | None]:
    """(the run's recorded training steps, the roles with a share at the latest of them, or
    None when its episodes carry no shares)."""
    train = Episode.objects.filter(run_id=run_id, kind=Episode.TRAIN)
    steps = sorted(set(train.values_list("step", flat=True)))
    if not steps:
        return [], None
    latest = train.filter(step=steps[-1])
    shares = [unpack(data).get("grad_share") for data in latest.values_list("data", flat=True)]
    if all(s is None for s in shares):
        return steps, None
    return steps, sorted({role for s in shares if s for role in s})


@register.inclusion_tag("experiments/_grad_drill.html")
def grad_drill_panel(run: Run) -> dict:
    steps, roles = drill_roles(run.id)
    rows = []
    for role in roles or []:
        norms = values_at(run.id, role_key(role, "grad_norm"), steps)
        finite = [(s, v) for s, v in norms.items() if v is not None]
        spikes = sorted(finite, key=lambda pair: (-pair[1], pair[0]))[:SPIKES]
        rows.append(
            {
                "role": role,
                "spikes": [
                    {"step": s, "norm": v, **episodes_by_share(run.id, s, role)} for s, v in spikes
                ],
            }
        )
    return {"run": run, "recorded": bool(steps), "shares": roles is not None, "rows": rows}
