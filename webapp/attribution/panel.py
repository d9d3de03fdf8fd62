"""The run page's attribution panel, as plain data: the plans, the latest jobs, the bars.

Each role's bar is its share of the change with its 95% interval, drawn on one axis with zero
in the middle, above the change itself. The interaction term is a line of text under the
bars, not a bar: exact Shapley values already add up to the change, so a bar for it would
make the bars seem to sum to the wrong figure (with leave-one-out shares, which do not add
up, it is what is left). The table lists every evaluated combination (which roles came from
where, named as the user chose them: "latest (step 12)", its accuracy, and whether the run's
own evaluation stood for it).
"""

from __future__ import annotations

from analysis.attribution import parse_coalition_key
from analysis.intervals import Estimate
from trainer.checkpoint_index import list_checkpoints, parse_checkpoint
from trainer.routing import WORKFLOW_ROLES
from webapp.attribution.models import SwapJob
from webapp.attribution.planning import KINDS, plan_jobs, run_dir
from webapp.experiments.models import Run

WIDTH = 360  # px of the bars' axis
ROW = 22  # px per bar


def bars(result: dict) -> dict:
    """SVG geometry of the shares and the change: {"rows", "height", "zero", "interaction",
    "adds_up"}; each row {"label", "value", "low", "high", "x", "width", "lo_x", "hi_x",
    "y"}. `interaction` is the term with its interval, said in words beside the bars;
    `adds_up` whether the shares add up to the change (exact Shapley values do)."""
    items = [(role, Estimate.from_share(result["shares"][role])) for role in result["roles"]]
    items += [("total change", Estimate.from_share(result["change"]))]
    reach = max([1e-9] + [abs(x) for _, est in items for x in (est.mean, est.low, est.high)])
    zero, scale = WIDTH / 2, (WIDTH / 2 - 8) / reach
    rows = []
    for i, (label, est) in enumerate(items):
        x = zero + min(0.0, est.mean) * scale
        rows.append(
            {
                "label": label,
                **est.as_share(),
                "x": round(x, 1),
                "width": round(abs(est.mean) * scale, 1),
                "lo_x": round(zero + est.low * scale, 1),
                "hi_x": round(zero + est.high * scale, 1),
                "y": i * ROW,
                "total": label == "total change",
            }
        )
    return {
        "rows": rows,
        "height": len(rows) * ROW,
        "zero": zero,
        "width": WIDTH,
        "interaction": result.get("interaction"),
        "adds_up": result.get("method") == "shapley",
    }


def source_text(stored: str, chosen: str = "") -> str:
    """A role's source as the user named it: "latest (step 12)" for a checkpoint (the name
    chosen in the form, else its kind, and the step its directory names), else the stored
    source as it is ("base", "latest")."""
    ref = parse_checkpoint(stored) if stored and stored != "base" else None
    if ref is None:
        return stored or "—"
    name = chosen if chosen and "/" not in chosen else ref.kind
    return f"{name} (step {ref.step})"


def _chosen(key: str) -> dict[str, str]:
    """{role: source as chosen} from a mix evaluation's key, "aggregator=latest judge=base"."""
    return dict(part.split("=", 1) for part in key.split() if "=" in part)


def combinations(job: SwapJob) -> list[dict]:
    roles = job.plan.get("roles", [])
    rows = []
    for planned in job.plan.get("evaluations", []):
        done = job.evaluations.get(planned["key"])
        trained = parse_coalition_key(planned["key"]) if job.kind != "mix" else None
        chosen = _chosen(planned["key"]) if job.kind == "mix" else {}
        rows.append(
            {
                "key": planned["key"],
                "sources": [
                    source_text(str(planned["sources"].get(r, "")), chosen.get(r, ""))
                    for r in roles
                ],
                "trained": sorted(trained or []),
                "accuracy": done["accuracy"] if done else None,
                "reused_step": done.get("reused_step") if done else planned["reuse_step"],
                "seconds": done["seconds"] if done else None,
            }
        )
    return rows


def panel(run: Run, manage: bool) -> dict:
    jobs = list(run.swap_jobs.all()[:10])
    latest = next((j for j in jobs if j.kind in KINDS and j.status == SwapJob.SUCCEEDED), None)
    shown = []
    for job in jobs[:5]:
        shown.append(
            {
                "job": job,
                "title": KINDS[job.kind].change if job.kind in KINDS else "mix and match",
                "combinations": combinations(job),
            }
        )
    can_plan = manage and not run.external
    return {
        "run": run,
        "manage": manage,
        "plans": [(kind, KINDS[kind], plan) for kind, plan in plan_jobs(run).items()]
        if can_plan
        else [],
        "latest": latest,
        "latest_title": KINDS[latest.kind].change if latest else "",
        "bars": bars(latest.result) if latest else None,
        "jobs": shown,
        "roles": _roles(run),
        "choices": ["base", "best", "latest", *_kept(run)],
    }


def _roles(run: Run) -> list[str]:
    return list(WORKFLOW_ROLES.get(run.config.get("workflow"), ()))


def _kept(run: Run) -> list[str]:
    return [ref.path.name for ref in list_checkpoints(run_dir(run)) if ref.kind == "step"]
