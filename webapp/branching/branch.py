"""Branching a run: child runs that start from one of its kept checkpoints and change one
thing each. The form (`views.py`) and the API share this module.

- `kept_checkpoints(run)`: the checkpoints a run still has on disk
  (`trainer.checkpoint_index.list_checkpoints`, torch-free), its best ("peak") first, then its
  step checkpoints newest first, one per step (a step checkpoint at the peak's step is the
  same state, so only the peak is listed). Every one is offered, the last step's too: the
  best checkpoint is often the last, and a child branched at or after the parent's
  last step trains `EXTRA_EVALUATIONS` evaluations' worth of steps past it
  (`child_steps`), so it has something to train and three evaluations for its final.
- `plan_branches(parent, checkpoint, requests, control)`: one child per requested change, plus
  an unchanged "control continuation" when asked, each config being the parent's config, the
  change, and `init_from` = the checkpoint, validated by `trainer.config` — before anything is
  stored. A request is `{"kl_beta": v}`, `{"kl_beta_per_role": {role: v}}`,
  `{"coherence_lambda": v}` or `{"lr_factor": f}` (lr × f, 0 < f < 1). Errors are a
  ConfigError keyed by the caller's names for the requests (a form field, `branches[2]`).
- `queue_branches(plan)`: freezes the checkpoint, stores the children in the parent's
  experiment with their lineage (parent, branch_step, intervention) and queues them through
  `queueing`, once the transaction commits.

Sharing mode is not a change a branch can make: it decides how many policies there are and
which roles train which, and a checkpoint holds exactly that set of policies (the trainer
refuses a child whose policy layout differs from its checkpoint's).

Why the checkpoint is frozen: a running parent keeps only its newest step checkpoints and
replaces its best one when it beats it, and a failed parent that is resumed drops a best saved
after the checkpoint it resumes from. A child waiting in the queue must still find what it was
branched from, so the checkpoint is linked (hard links; copied where links fail) under
`$TROUPE_DATA_DIR/branch-points/run-<id>-<random>/` (`runs/checkpoint_refs.freeze`), laid
out as a run directory (its `config.json` and `checkpoints/<name>/`), and the child's
`init_from` names that copy relative to the data directory (never the server's path, which a
user would see in the config). The trainer writes checkpoints to a new directory and renames
it, never rewriting a file in place, so a link keeps the bytes it was made with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from trainer.checkpoint_index import CheckpointRef, list_checkpoints
from trainer.checkpoint_index import find_checkpoint as resolve_name
from trainer.config import WORKFLOW_ROLES, ConfigError, config_from_dict
from vocabulary.names import ACCURACY_KEY
from webapp.experiments.models import Run, RunLog
from webapp.metrics import values_at
from webapp.runs.checkpoint_refs import freeze, run_folder, stored_start
from webapp.runs.lineage import change_text
from webapp.runs.queueing import new_run, send_runs

CHANGES = ("kl_beta", "kl_beta_per_role", "coherence_lambda", "lr_factor")
NAME_LIMIT = Run._meta.get_field("name").max_length
# DESIGN §6's final is the mean of the last 3 evaluations: a child from the parent's last
# step needs at least that many past its branch point to have a final of its own.
EXTRA_EVALUATIONS = 3


@dataclass(frozen=True)
class Kept:
    """A checkpoint a branch may start from, as the form and the API show it."""

    ref: CheckpointRef
    accuracy: float | None = None  # eval/accuracy at its step, when evaluated there

    @property
    def name(self) -> str:
        return self.ref.path.name  # best-000004, step-000010: unique within a run

    @property
    def step(self) -> int:
        return self.ref.step

    @property
    def peak(self) -> bool:
        return self.ref.kind == "best"

    def json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "step": self.step,
            "kind": self.ref.kind,
            "peak": self.peak,
            "accuracy": self.accuracy,
        }


@dataclass(frozen=True)
class Child:
    intervention: dict[str, Any]  # the config fields changed; {} for the control
    config: dict[str, Any]  # the validated config, init_from naming the parent's checkpoint
    label: str  # "lr 0.01 → 0.001", "control (no change)"


@dataclass(frozen=True)
class Plan:
    parent: Run
    checkpoint: Kept
    children: list[Child] = field(default_factory=list)


def can_branch(run: Run) -> bool:
    """Only runs trained here have checkpoints; external runs log metrics and nothing else."""
    return not run.external and bool(run.checkpoint_dir)


def _all_kept(run: Run) -> list[Kept]:
    """Every complete checkpoint on disk, the peak first, then steps newest first."""
    if not can_branch(run) or not run_folder(run).is_dir():
        return []
    refs = sorted(
        list_checkpoints(run_folder(run)), key=lambda ref: (ref.kind != "best", -ref.step)
    )
    accuracy = values_at(run.id, ACCURACY_KEY, (ref.step for ref in refs))
    return [Kept(ref, accuracy.get(ref.step)) for ref in refs]


def kept_checkpoints(run: Run) -> list[Kept]:
    """What the form and the API offer: one checkpoint a step, the peak where it has one."""
    seen: set[int] = set()
    offered = []
    for kept in _all_kept(run):  # the peak comes first, so it wins its step
        if kept.step not in seen:
            seen.add(kept.step)
            offered.append(kept)
    return offered


def find_checkpoint(run: Run, name: str) -> Kept:
    """The kept checkpoint called `name` (best, latest, step-N, best-N: the trainer's one
    resolver, `trainer.checkpoint_index.find_checkpoint`), or ConfigError."""
    if not _all_kept(run):
        raise ConfigError({"checkpoint": f"run {run.id} has no checkpoint to branch from yet"})
    try:
        ref = resolve_name(run_folder(run), name)
    except (FileNotFoundError, ValueError):
        names = ", ".join(k.name for k in kept_checkpoints(run))
        raise ConfigError(
            {"checkpoint": f"{name!r} is not a kept checkpoint; kept: {names}"}
        ) from None
    return Kept(ref, values_at(run.id, ACCURACY_KEY, [ref.step]).get(ref.step))


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _tidy(number: float) -> float:
    """lr × factor without the float noise (0.01 × 0.1 is 0.0010000000000000002)."""
    return float(f"{number:.12g}")


def intervention_for(config: dict[str, Any], request: Any) -> dict[str, Any]:
    """The config fields one request changes, checked against the parent's config.

    Raises ValueError saying what is wrong with the request."""
    if not isinstance(request, dict) or len(request) != 1:
        raise ValueError(
            "give exactly one change, one of: " + ", ".join(CHANGES) + ' (e.g. {"lr_factor": 0.1})'
        )
    ((name, value),) = request.items()
    if name == "lr_factor":
        factor = _number(value)
        if not 0 < factor < 1:
            raise ValueError(f"lr_factor {factor:g} is not a cut: give a factor between 0 and 1")
        return {"lr": _tidy(float(config["lr"]) * factor)}
    if name == "kl_beta_per_role":
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError('give one role and its coefficient, e.g. {"generator": 0.05}')
        ((role, beta),) = value.items()
        roles = WORKFLOW_ROLES.get(config.get("workflow"), ())
        if role not in roles:
            raise ValueError(f"{role!r} is not a role of this run; its roles: {', '.join(roles)}")
        beta = _number(beta)
        anchors = config.get("kl_beta_per_role") or {}
        if beta == anchors.get(role, config.get("kl_beta", 0.0)):
            raise ValueError(f"the KL anchor of {role} is already {beta:g}: that changes nothing")
        return {"kl_beta_per_role": {str(role): beta}}
    if name in ("kl_beta", "coherence_lambda"):
        number = _number(value)
        if number == config.get(name):
            raise ValueError(f"{name} is already {number:g}: that changes nothing")
        return {name: number}
    raise ValueError(f"{name!r} is not a change a branch can make; one of: {', '.join(CHANGES)}")


def child_steps(parent_config: dict, branch_step: int) -> int:
    """The parent's steps, or, from a checkpoint at or past them (the peak was the last
    evaluation), `EXTRA_EVALUATIONS` evaluations past the branch step."""
    steps = int(parent_config["steps"])
    if branch_step < steps:
        return steps
    return branch_step + EXTRA_EVALUATIONS * int(parent_config.get("eval_every") or 1)


def child_config(
    parent_config: dict, intervention: dict, init_from: str, branch_step: int = 0
) -> dict[str, Any]:
    """Parent config + intervention + init_from, validated by trainer.config (ConfigError)."""
    values = {**parent_config, "init_from": init_from}
    values["steps"] = child_steps(parent_config, branch_step)
    for name, value in intervention.items():
        if name == "kl_beta_per_role":  # one role's anchor changes; the others stay
            value = {**(parent_config.get(name) or {}), **value}
        values[name] = value
    return config_from_dict(values).to_dict()


def plan_branches(
    parent: Run, checkpoint: str, requests: list[tuple[str, Any]], control: bool
) -> Plan:
    """The children to queue; ConfigError keyed by `checkpoint`, the requests' names, or
    `control` (when nothing at all is asked for), naming every problem at once."""
    if not can_branch(parent):
        raise ConfigError({"run": f"run {parent.id} is external: it has no checkpoints"})
    kept = find_checkpoint(parent, checkpoint)
    errors: dict[str, str] = {}
    wanted: list[tuple[str, dict]] = [("control", {})] if control else []
    for name, request in requests:
        try:
            wanted.append((name, intervention_for(parent.config, request)))
        except ValueError as exc:
            errors[name] = str(exc)
    if not wanted and not errors:
        errors["control"] = "nothing to queue: choose a change, or the control continuation"
    seen: dict[str, str] = {}
    children = []
    for name, intervention in wanted:
        key = repr(sorted(intervention.items()))
        if key in seen:
            errors[name] = f"the same change as {seen[key]}"
            continue
        seen[key] = name
        try:
            config = child_config(parent.config, intervention, str(kept.ref.path), kept.step)
        except ConfigError as exc:
            errors[name] = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
            continue
        children.append(Child(intervention, config, change_text(intervention, parent.config)))
    if errors:
        raise ConfigError(errors)
    return Plan(parent, kept, children)


def _name(label: str, parent: Run, step: int) -> str:
    return f"{label} · from run {parent.id} @{step}"[:NAME_LIMIT]


def queue_branches(plan: Plan) -> list[Run]:
    """Store and queue the plan's children; their init_from names the frozen checkpoint.
    ConfigError (`checkpoint`) when the checkpoint vanished since the plan was made."""
    parent, kept = plan.parent, plan.checkpoint
    try:
        frozen = stored_start(freeze(parent, kept.ref))
    except FileNotFoundError:  # the parent, still training, dropped it since it was listed
        raise ConfigError(
            {"checkpoint": f"{kept.name} is no longer kept by run {parent.id}: choose again"}
        ) from None
    runs, lines = [], []
    for child in plan.children:
        config = config_from_dict({**child.config, "init_from": frozen})
        run = new_run(parent.experiment, config)
        run.name = _name(child.label, parent, kept.step)
        run.parent = parent
        run.branch_step = kept.step
        run.intervention = child.intervention
        runs.append(run)
        lines.append(child.label)
    with transaction.atomic():
        runs = Run.objects.bulk_create(runs)
        where = f"step {kept.step}" + (" (the peak)" if kept.peak else "")
        steps = plan.children[0].config["steps"] if plan.children else parent.total_steps
        if steps != parent.config.get("steps"):  # the last step's checkpoint: trains on
            where += f", training on to step {steps}"
        RunLog.objects.bulk_create(
            RunLog(run=run, line=f"Branched from run {parent.id} at {where}: {label}.")
            for run, label in zip(runs, lines, strict=True)
        )
        ids = ", ".join(str(run.id) for run in runs)
        RunLog.objects.create(run=parent, line=f"Branches queued from {where}: runs {ids}.")
        transaction.on_commit(lambda: send_runs(runs))
    return runs
