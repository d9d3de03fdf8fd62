"""What a swap job will evaluate, what it reuses, what it costs, or why it cannot run.

Torch-free: the run page shows the plan before anything is queued, and the API answers it.

An attribution moves every role from one source to another and splits the change among the
roles (`analysis/attribution.py`):

- `gain`: from the base model to the final checkpoint (`latest`): final − base;
- `peak_gain`: from the base model to the best checkpoint: peak − base;
- `cliff`: from the best checkpoint (the peak) to the final one: which role's post-peak
  update explains the drop.

Each coalition is one evaluation. The two corners (every role from one source) are the run's
own evaluations of those steps when `eval_problems.jsonl` holds them: the worker evaluates
with the run's own config, so the problems, samples and row seeds are the same
(`trainer/mixed_eval.py`); not for a run that sampled with vLLM (other noise). A plan is
refused, with the reason, when the run is not a finished run trained here, a checkpoint it
needs is gone (a run keeps its last two step checkpoints and its best), or the two sources
are the weights of one step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.core.exceptions import PermissionDenied

from analysis.attribution import coalition_key, method_for, plan_coalitions
from trainer.checkpoint_index import NAMES, is_checkpoint_name
from trainer.config import ConfigError, config_from_dict
from trainer.eval_problems import read_per_problem
from trainer.role_sources import resolve_sources
from vocabulary.names import EVAL_SECONDS_KEY
from webapp.experiments.models import Run
from webapp.metrics import read_series
from webapp.runs.checkpoint_refs import Refused, reference_of, run_folder, take


@dataclass(frozen=True)
class Kind:
    source: str  # every role's weights before …
    target: str  # … and after
    button: str
    change: str  # what v(all) − v(none) is


KINDS = {
    "gain": Kind("base", "latest", "Attribute this run's gain", "final − base"),
    "peak_gain": Kind("base", "best", "Attribute this run's peak gain", "peak − base"),
    "cliff": Kind("best", "latest", "Attribute the drop after the peak", "final − peak"),
}


@dataclass
class Plan:
    kind: str
    roles: list[str] = field(default_factory=list)
    method: str = ""
    steps: dict[str, int] = field(default_factory=dict)  # {"source": step, "target": step}
    evaluations: list[dict] = field(default_factory=list)  # {"key", "sources", "reuse_step"}
    to_run: int = 0
    estimated_seconds: float | None = None
    problem: str = ""  # why it cannot run; empty when it can

    def as_json(self) -> dict:
        return asdict(self)


def run_dir(run: Run) -> Path:
    """Where the run's worker trained it (the worker's `workers.execute.run_dir`)."""
    return run_folder(run)


def _refusal(run: Run) -> str:
    if run.external:
        return "an external run has no checkpoints here"
    if run.status in Run.ACTIVE:
        return f"the run is {run.status}: attribute it once it has finished"
    return ""


def _own_evaluations(out: Path) -> dict[int, list[float]]:
    try:
        return read_per_problem(out)
    except OSError:
        return {}


def eval_seconds(run: Run) -> float | None:
    """The run's mean evaluation time: what one mix-and-match evaluation costs, about."""
    series = read_series(run.id, [EVAL_SECONDS_KEY], 0).get(EVAL_SECONDS_KEY)
    values = [v for v in (series or {}).get("values", []) if v is not None]
    return sum(values) / len(values) if values else None


def plan_job(run: Run, kind: str) -> Plan:
    """The plan of a `kind` attribution of `run` (ValueError for an unknown kind)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not one of {', '.join(KINDS)}")
    return plan_jobs(run, (kind,))[kind]


def plan_jobs(run: Run, kinds=tuple(KINDS)) -> dict[str, Plan]:
    """Each kind's plan of `run`. The run page shows all three: its config, checkpoints,
    own evaluations and evaluation time are read once for them, not once a kind."""
    if problem := _refusal(run):
        return {kind: Plan(kind=kind, problem=problem) for kind in kinds}
    try:
        config = config_from_dict(run.config)
    except ConfigError as exc:
        problem = f"the run's config is not valid any more: {exc}"
        return {kind: Plan(kind=kind, problem=problem) for kind in kinds}
    out = run_dir(run)
    resolved: dict[str, dict | Exception] = {}  # a checkpoint name -> every role's source

    def sources_of(name: str) -> dict:
        if name not in resolved:
            try:
                resolved[name] = resolve_sources({}, config, out, default=name)
            except (FileNotFoundError, ValueError) as exc:
                resolved[name] = exc
        if isinstance(resolved[name], Exception):
            raise resolved[name]
        return resolved[name]

    # A run that sampled with vLLM evaluated with other noise than the exact sampler a swap
    # job uses: its own evaluations are not paired with the job's, so none stands in.
    own = _own_evaluations(out) if config.rollout_engine == "hf" else {}
    seconds = eval_seconds(run)
    return {kind: _plan(kind, list(config.roles), sources_of, own, seconds) for kind in kinds}


def _plan(kind: str, roles: list[str], sources_of, own: dict, seconds: float | None) -> Plan:
    plan = Plan(kind=kind)
    spec = KINDS[kind]
    try:
        both = {
            side: sources_of(name)
            for side, name in (("source", spec.source), ("target", spec.target))
        }
    except (FileNotFoundError, ValueError) as exc:
        plan.problem = f"a checkpoint is missing: {exc}"
        return plan
    plan.steps = {side: sources[roles[0]].step for side, sources in both.items()}
    if plan.steps["source"] == plan.steps["target"]:  # best-N and step-N: the same weights
        plan.problem = (
            f"{spec.source} and {spec.target} are the weights of one step "
            f"({plan.steps['source']}): there is no change to attribute"
        )
        return plan
    full = frozenset(roles)
    plan.roles, plan.method = roles, method_for(roles)
    for coalition in plan_coalitions(roles):
        corner = {frozenset(): "source", full: "target"}.get(coalition)
        reuse = plan.steps[corner] if corner and plan.steps[corner] in own else None
        plan.evaluations.append(
            {
                "key": coalition_key(coalition, roles),
                "sources": {r: spec.target if r in coalition else spec.source for r in roles},
                "reuse_step": reuse,
            }
        )
    plan.to_run = sum(1 for e in plan.evaluations if e["reuse_step"] is None)
    if seconds is not None:
        plan.estimated_seconds = round(seconds * plan.to_run, 1)
    return plan


def _check_source(user, role: str, source: str) -> None:
    """A mix source is `base`, a checkpoint name of the run, or `RUN:NAME` of a run `user`
    may take weights from (runs/checkpoint_refs.py); ValueError naming the accepted forms,
    PermissionDenied for another user's run."""
    if source == "base" or is_checkpoint_name(source):
        return
    try:
        take(user, *reference_of(source))
    except Refused as exc:
        if exc.forbidden:
            raise PermissionDenied(f"{role}: {exc}") from None
        raise ValueError(f"{role}: {exc}; or base, {NAMES} of this run") from None


def plan_mix(run: Run, sources: dict[str, str], user) -> Plan:
    """One mix-and-match evaluation with each role from `sources` (roles left out: base),
    taken by `user`."""
    plan = Plan(kind="mix")
    if problem := _refusal(run):
        plan.problem = problem
        return plan
    config = config_from_dict(run.config)
    unknown = sorted(set(sources) - set(config.roles))
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} not a role of {config.workflow}; its roles are "
            f"{', '.join(config.roles)}"
        )
    plan.roles = list(config.roles)
    full = {role: sources.get(role, "base") for role in plan.roles}
    for role, source in full.items():
        _check_source(user, role, source)
    try:  # the worker resolves the same names with the same root (workers/attribution.py)
        resolve_sources(full, config, run_dir(run), runs=run_dir(run).parent)
    except (FileNotFoundError, ValueError) as exc:
        plan.problem = str(exc)
        return plan
    plan.evaluations = [
        {
            "key": " ".join(f"{role}={full[role]}" for role in plan.roles),
            "sources": full,  # names and references, never a path
            "reuse_step": None,
        }
    ]
    plan.to_run = 1
    if (seconds := eval_seconds(run)) is not None:
        plan.estimated_seconds = round(seconds, 1)
    return plan
