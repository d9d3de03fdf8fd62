"""The run page's gradient drill-down: per role, the recorded steps where its gradient norm
was largest, each linked to that step's episodes ordered by their share of the role's
gradient (`grad_share`, trainer/grad_drill.py; recorded with `episodes_grad_share`).

From a spike of `role/<r>/grad_norm` a researcher wants the episodes that drove it: only
training steps with recorded episodes can answer, so the spikes offered are the largest norms
among those steps — and only steps where some recorded episode carried a share of the role's
gradient: a link to a step whose recorded episodes all carried 0% leads nowhere,
so such steps are skipped and counted (`empty`), and the panel says why none is offered. A
tag, so the run view stays as it is: the recorded steps, the latest step's records, each
role's norms at those steps, and one query per step looked at (at most `LOOKED_AT` a role).
The tag (templatetags/grad_drill.py) only renders what `grad_drill_panel` builds.
"""

from __future__ import annotations

from urllib.parse import urlencode

from vocabulary.names import GRAD_NORM, role_key
from webapp.episodes.codec import unpack
from webapp.episodes.models import Episode
from webapp.experiments.models import Run
from webapp.metrics import values_at

SPIKES = 3  # steps offered per role
LOOKED_AT = 12  # recorded steps a role's spikes are looked for in, largest norm first
CARRIED = 1e-9  # a share below this is no gradient: a float's dust, not an episode's part


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


def carried_gradient(run_id: int, step: int, role: str) -> bool:
    """Whether any recorded training episode of `step` carried a share of `role`'s gradient."""
    rows = Episode.objects.filter(run_id=run_id, kind=Episode.TRAIN, step=step)
    for data in rows.values_list("data", flat=True):
        share = (unpack(data).get("grad_share") or {}).get(role)
        if share is not None and abs(share) > CARRIED:
            return True
    return False


def grad_drill_panel(run: Run) -> dict:
    steps, roles = drill_roles(run.id)
    rows = []
    for role in roles or []:
        norms = values_at(run.id, role_key(role, GRAD_NORM), steps)
        finite = [(s, v) for s, v in norms.items() if v is not None]
        spikes, empty = [], 0
        for s, v in sorted(finite, key=lambda pair: (-pair[1], pair[0]))[:LOOKED_AT]:
            if len(spikes) == SPIKES:
                break
            if carried_gradient(run.id, s, role):
                spikes.append({"step": s, "norm": v, **episodes_by_share(run.id, s, role)})
            else:
                empty += 1
        rows.append({"role": role, "spikes": spikes, "empty": empty, "logged": bool(finite)})
    return {"run": run, "recorded": bool(steps), "shares": roles is not None, "rows": rows}
