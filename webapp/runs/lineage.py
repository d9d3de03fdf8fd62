"""The lineage of runs (parents and their branches): what a branch changed, in words, and
the family of runs a compare view overlays.

A branch has `parent`, `branch_step` (the step of the parent's checkpoint it starts from) and
`intervention` (the config fields it changed; {} for a control continuation, None for a run
that is not a branch). Its series begin at `branch_step`: the trainer evaluates the checkpoint
there before it trains on, so the child's first point sits on the parent's curve.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from webapp.experiments.models import Run
from webapp.runs.lifecycle import live_runs

CONTROL = "control (no change)"
NAMES = {"lr": "lr", "kl_beta": "KL anchor", "coherence_lambda": "coherence λ"}


def number(value: Any) -> str:
    """0.0001 → '0.0001', 2e-05 → '2e-5', 0.1 → '0.1': short, and never float noise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return re.sub(
        r"e([+-])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), f"{value:.4g}"
    )


def change_text(intervention: dict[str, Any] | None, parent_config: dict[str, Any]) -> str:
    """'lr 0.01 → 0.001', 'KL anchor of generator 0 → 0.05', 'control (no change)'."""
    if not intervention:
        return CONTROL

    def old(value: Any) -> str:  # None: the parent is gone, and with it the old value
        return "?" if value is None else number(value)

    parts = []
    for name, new in intervention.items():
        if name == "kl_beta_per_role" and isinstance(new, dict):
            anchors = parent_config.get(name) or {}
            for role, beta in new.items():
                before = anchors.get(role, parent_config.get("kl_beta"))
                parts.append(f"KL anchor of {role} {old(before)} → {number(beta)}")
            continue
        parts.append(f"{NAMES.get(name, name)} {old(parent_config.get(name))} → {number(new)}")
    return "; ".join(parts)


def is_branch(run: Run) -> bool:
    return run.branch_step is not None


def lineage_text(run: Run) -> str:
    """'branched from run #12 at step 4: lr 0.01 → 0.001' ('' for a run that is no branch)."""
    if not is_branch(run):
        return ""
    parent = run.parent
    source = f"run #{parent.id}" if parent else "a deleted run"
    change = change_text(run.intervention, parent.config if parent else {})
    return f"branched from {source} at step {run.branch_step}: {change}"


def children_of(run: Run) -> list[Run]:
    """The run's branches (less those an MLflow client deleted): control continuations first,
    then in the order they were made."""
    children = list(live_runs(run.children.select_related("parent")).order_by("id"))
    children.sort(key=lambda child: bool(child.intervention))
    return children


def lineage_json(run: Run, detail: bool = False) -> dict[str, Any]:
    """The run API's `lineage`; `detail` adds the sentence and the children (two queries)."""
    data: dict[str, Any] = {
        "parent": run.parent_id,
        "branch_step": run.branch_step,
        "intervention": run.intervention,
    }
    if detail:
        data["text"] = lineage_text(run) or None
        data["children"] = [
            {
                "id": child.id,
                "branch_step": child.branch_step,
                "intervention": child.intervention,
                "text": change_text(child.intervention, run.config),
                "status": child.status,
                "url": reverse("run_detail", args=[child.id]),
            }
            for child in children_of(run)
        ]
    return data


@dataclass(frozen=True)
class Family:
    """A parent and its branches, as the compare view's lineage mode draws them."""

    parent: Run
    children: list[Run]

    @property
    def runs(self) -> list[Run]:
        return [self.parent, *self.children]

    @property
    def run_ids(self) -> list[int]:
        return [run.id for run in self.runs]

    @property
    def branch_steps(self) -> list[int]:
        return sorted({child.branch_step for child in self.children})

    def label(self, run: Run) -> str:
        if run.id == self.parent.id:
            return f"run {run.id} · parent"
        return f"run {run.id} · {change_text(run.intervention, self.parent.config)}"

    def labels(self) -> dict[int, str]:
        return {run.id: self.label(run) for run in self.runs}


def family_of(run_id: int) -> Family | None:
    """The run and its branches; for a branch with none of its own, its parent's family (so
    a link from any member shows them all). None when the run does not exist."""
    run = Run.objects.select_related("parent").filter(id=run_id).first()
    if run is None:
        return None
    children = children_of(run)
    if not children and run.parent is not None:
        run, children = run.parent, children_of(run.parent)
    return Family(run, children)


def from_branch_step(series: dict[str, list], branch_step: int | None) -> dict[str, list]:
    """A child's {"steps", "values"} from its branch step on (all of it for the parent): the
    parent's history before the branch is drawn once, by the parent."""
    if branch_step is None:
        return series
    steps = series.get("steps", [])
    keep = [i for i, step in enumerate(steps) if step >= branch_step]
    return {
        name: [values[i] for i in keep]
        if isinstance(values, list) and len(values) == len(steps)
        else values
        for name, values in series.items()
    }


@dataclass(frozen=True)
class Branching:
    """Where a branch leaves its parent, and what it changed ('lr 0.01 → 0.001')."""

    parent_id: int
    step: int
    change: str
    control: bool  # a control continuation: it changes nothing


def branchings(runs: list[Run]) -> dict[int, Branching]:
    """For each of `runs` that is a branch of another of `runs`: its Branching. One query (the
    parents' configs, which a compare view's runs are read without)."""
    ids = {run.id for run in runs}
    children = [run for run in runs if run.branch_step is not None and run.parent_id in ids]
    if not children:
        return {}
    configs = dict(
        Run.objects.filter(id__in={c.parent_id for c in children}).values_list("id", "config")
    )
    return {
        child.id: Branching(
            child.parent_id,
            child.branch_step,
            change_text(child.intervention, configs.get(child.parent_id) or {}),
            not child.intervention,
        )
        for child in children
    }
