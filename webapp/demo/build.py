"""A finished demo experiment with synthetic but realistic metric series.

Tests, the browser screenshots, `bench/matrix_view.py` and `manage.py load_demo_experiment`
all build their data here, so what the panel is tested on is what a newcomer sees in the demo.
Nothing is trained: the series are drawn from a seeded model of the study's findings
(docs/design.md §1), with the docs/design.md §5 metric names:

- accuracy rises from the base model's level by a gain that depends on workflow × task ×
  model; isolated policies (`per_role`) peak a little higher but fall off a terminal cliff
  more often than a shared policy;
- before most cliffs one role's `grad_norm` amplifies (its parallel same-role agents' gradients
  align: `grad_cos` between them rises towards 1), and after a collapse the other roles' norms
  rise too;
- under a shared policy the role with the most gradient mass takes most of `grad_share`, and in
  some runs captures the policy (share above 0.6 for most of the last half).

Every run then goes through the live radar (`webapp.alerts.radar.refresh_alerts`), as a
trained run's points do, so the radar cards and Alerts say what the key results say. The
experiment's preset reads `synthetic` (`SYNTHETIC`): its runs' configs are the cpu-demo
preset's, but nothing was trained.

Two runs are fixed, whatever the seed draws, so tests can check the panel against known
answers: `cliff_run` (voting · math · tiny-s · per_role · seed 0) falls off a cliff at
`cliff_onset`, and its `amplified_role` ("generator") amplifies exactly `LEAD` (10) steps
before; `capture_run` (the same cell under `shared`) is captured by `capturing_role`
("generator"). Both are among the first runs made, so any experiment of two runs or more has
them.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.db import transaction
from django.utils import timezone

from analysis.amplification import amplification_onset
from trainer.config import make_config
from trainer.routing import WORKFLOW_TABLE
from vocabulary.names import (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    CELL_AXES,
    ENTROPY,
    ENTROPY_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    KL_KEY,
    PER_AGENT,
    PER_ROLE,
    RESP_LEN_KEY,
    REWARD_KEY,
    SHARED,
    grad_cos_key,
    role_key,
)
from webapp.alerts.radar import refresh_alerts
from webapp.experiments.models import Experiment, Run
from webapp.metrics import load_new_points
from webapp.runs.name_claims import claim_name

DEMO_MATRIX = {
    "workflow": ["voting", "eval_opt", "orch_workers"],
    "task": ["math", "code"],
    "model": ["tiny-s", "tiny-m"],
    "sharing": [SHARED, PER_ROLE],
    "seed": [0, 1, 2],
}
SYNTHETIC = "synthetic"  # the experiment's preset: not "cpu-demo", which would claim training
LEAD = 10  # steps between the known run's amplification onset and its cliff

# Base accuracy of the untrained model, by task and model; gains by workflow and task.
_BASE = {
    ("math", "tiny-s"): 0.32,
    ("math", "tiny-m"): 0.41,
    ("math", "tiny-l"): 0.48,
    ("code", "tiny-s"): 0.18,
    ("code", "tiny-m"): 0.26,
    ("code", "tiny-l"): 0.31,
}
_GAIN = {
    ("voting", "math"): 0.15,
    ("eval_opt", "math"): 0.11,
    ("orch_workers", "math"): 0.06,
    ("single", "math"): 0.08,
    ("voting", "code"): 0.05,
    ("eval_opt", "code"): 0.13,
    ("orch_workers", "code"): 0.03,
    ("single", "code"): 0.06,
}
_MODEL_SCALE = {"tiny-s": 1.0, "tiny-m": 1.25, "tiny-l": 0.8}
# Chance of a terminal cliff: isolated policies fall more often (the study's finding), most
# of all where parallel same-role agents amplify one role's gradient.
_CLIFF_CHANCE = {SHARED: 0.12, PER_ROLE: 0.35, PER_AGENT: 0.45}
# The role whose parallel agents share a turn in each workflow that has one (voting's
# generators, orch_workers' workers), from trainer's workflow table.
_PARALLEL_ROLE = {name: next(iter(w.parallel)) for name, w in WORKFLOW_TABLE.items() if w.parallel}
_ROLE_LEVEL = {
    "generator": 0.8,
    "aggregator": 0.5,
    "evaluator": 0.6,
    "orchestrator": 0.4,
    "worker": 0.7,
    "synthesizer": 0.45,
    "solver": 0.7,
}


@dataclass
class DemoExperiment:
    """The experiment and the runs whose answers are known (None when too few runs)."""

    experiment: Experiment
    cliff_run: Run | None
    cliff_onset: int | None
    amplified_role: str
    amplification_onset: int | None
    capture_run: Run | None
    capturing_role: str


@dataclass
class _Plan:
    """What one run's series will show, decided before any number is drawn."""

    cliff_at: int | None  # an evaluation step, or None
    amplified: str | None  # the role whose grad_norm amplifies
    amplify_at: int | None
    capture: str | None  # the role pushed to capture a shared policy
    known: bool = False  # one of the two runs whose answers are documented


def demo_cells(runs: int | None = None) -> list[dict]:
    """The (cell, seed) dicts of a demo experiment: seed-major, so the first runs cover every
    cell once before any cell gets a second seed. `runs=None` gives the full DEMO_MATRIX."""
    cells = [
        dict(zip(CELL_AXES, c)) for c in itertools.product(*(DEMO_MATRIX[a] for a in CELL_AXES))
    ]
    if runs is None:
        return [{**c, "seed": s} for s in DEMO_MATRIX["seed"] for c in cells]
    return [{**cells[i % len(cells)], "seed": i // len(cells)} for i in range(runs)]


def build_demo_experiment(
    owner,
    *,
    runs: int | None = None,
    steps: int = 200,
    eval_every: int = 10,
    name: str | None = None,
) -> DemoExperiment:
    """Create a finished experiment of `runs` runs (default: DEMO_MATRIX, 72 runs) owned by
    `owner`, with every run `succeeded` after `steps` steps, evaluated every `eval_every`."""
    if steps < 6 * eval_every:
        raise ValueError("steps must cover at least 6 evaluations, for a peak and a cliff")
    members = demo_cells(runs)
    now = timezone.now()
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=owner,
            name=name or f"Demo: workflows × tasks × models × sharing ({len(members)} runs)",
            description="Synthetic metric series (webapp/experiments/demo.py); nothing trained.",
            preset=SYNTHETIC,
            base_config={"steps": steps, "eval_every": eval_every},
            matrix={axis: sorted({m[axis] for m in members}, key=str) for axis in DEMO_MATRIX},
        )
        claim_name(experiment)
        made = []
        for member in members:
            config = make_config("cpu-demo", steps=steps, eval_every=eval_every, **member)
            made.append(
                Run(
                    experiment=experiment,
                    config=config.to_dict(),
                    config_hash=config.hash(),
                    status=Run.SUCCEEDED,
                    queue="cpu",
                    step=steps,
                    total_steps=steps,
                    started=now - timedelta(hours=2),
                    finished=now - timedelta(minutes=5),
                    heartbeat=now - timedelta(minutes=5),
                    attempts=1,
                    **member,
                )
            )
        made = Run.objects.bulk_create(made)
        rows = []
        for run in made:
            plan = _plan(run, steps, eval_every)
            rows += [
                (run.id, key, step, value)
                for key, step, value in _series(run, plan, steps, eval_every)
            ]
        load_new_points(rows)  # new points: COPY on PostgreSQL
        for run in made:  # the alerts of finished runs: the radar's final word on each
            refresh_alerts(run)

    known = {
        (m["workflow"], m["task"], m["model"], m["sharing"], m["seed"]): r
        for m, r in zip(members, made)
    }
    cliff_run = known.get(("voting", "math", "tiny-s", PER_ROLE, 0))
    capture_run = known.get(("voting", "math", "tiny-s", SHARED, 0))
    cliff_onset = _known_cliff_step(steps, eval_every) if cliff_run else None
    return DemoExperiment(
        experiment=experiment,
        cliff_run=cliff_run,
        cliff_onset=cliff_onset,
        amplified_role="generator",
        amplification_onset=cliff_onset - LEAD if cliff_onset is not None else None,
        capture_run=capture_run,
        capturing_role="generator",
    )


# --- what each run shows ------------------------------------------------------------------------


def _rng(run: Run, purpose: str) -> np.random.Generator:
    # crc32, not hash(): the same run must get the same numbers in every process.
    cell = f"{purpose}|{run.workflow}|{run.task}|{run.model}|{run.sharing}|{run.seed}"
    return np.random.default_rng(zlib.crc32(cell.encode()))


def _known_cliff_step(steps: int, eval_every: int) -> int:
    return int(round(0.6 * steps / eval_every)) * eval_every


def _is_known(run: Run, sharing: str) -> bool:
    return (run.workflow, run.task, run.model, run.sharing, run.seed) == (
        "voting",
        "math",
        "tiny-s",
        sharing,
        0,
    )


def _plan(run: Run, steps: int, eval_every: int) -> _Plan:
    rng = _rng(run, "plan")
    roles = WORKFLOW_TABLE[run.workflow].roles
    if _is_known(run, PER_ROLE):
        cliff_at = _known_cliff_step(steps, eval_every)
        return _Plan(cliff_at, "generator", cliff_at - LEAD, None, known=True)
    if _is_known(run, SHARED):
        return _Plan(None, None, None, "generator", known=True)
    cliff_at = amplified = amplify_at = None
    if rng.random() < _CLIFF_CHANCE.get(run.sharing, 0.2):
        evals = steps // eval_every
        cliff_at = int(rng.integers(int(0.55 * evals), int(0.85 * evals) + 1)) * eval_every
        if rng.random() < 0.8:  # most cliffs are preceded by amplification, not all
            amplified = _PARALLEL_ROLE.get(run.workflow, roles[0])
            amplify_at = cliff_at - int(rng.integers(4, 26))
    capture = None
    if run.sharing == SHARED and run.workflow in _PARALLEL_ROLE and rng.random() < 0.6:
        capture = _PARALLEL_ROLE[run.workflow]
    return _Plan(cliff_at, amplified, amplify_at, capture)


def _series(run: Run, plan: _Plan, steps: int, eval_every: int):
    """Yield (key, step, value) for every metric of one run. One generator draws every
    number in a fixed order (accuracy, training signals, gradient norms, cosines), so a
    run's curves are the same in every process."""
    rng = _rng(run, "series")
    train = np.arange(1, steps + 1)
    base, accuracy_at = _accuracy_curve(run, plan, rng, steps)
    evals = np.arange(0, steps + 1, eval_every)
    acc = np.clip(accuracy_at(evals) + rng.normal(0, 0.012, len(evals)), 0, 1)
    acc[0] = base  # step 0 is the base model itself
    for step, value in zip(evals, acc):
        yield ACCURACY_KEY, int(step), round(float(value), 4)
        # Its standard error, as a Troupe run logs it: the noise the curves were drawn with,
        # which the cliff's noise test reads (docs/analysis.md).
        yield ACCURACY_SE_KEY, int(step), 0.012
    signals = _training_signals(plan, accuracy_at(train), rng, train)
    for key, values in signals.items():
        yield from _points(key, train, values, 5)
    roles = WORKFLOW_TABLE[run.workflow].roles
    norms = {role: _role_norm(run, plan, role, rng, train) for role in roles}
    shares = _shares(norms, run.sharing)
    for role in roles:
        yield from _points(role_key(role, GRAD_NORM), train, norms[role], 5)
        yield from _points(role_key(role, GRAD_SHARE), train, shares[role], 5)
        role_entropy = signals[ENTROPY_KEY] * (0.8 + 0.1 * roles.index(role))
        yield from _points(role_key(role, ENTROPY), train, role_entropy, 5)
    # Cosines between gradients on the same policy: roles under a shared policy, parallel
    # agents of one role under isolated policies (they align as that role amplifies).
    for key, cos in _cosines(run, plan, train, rng).items():
        yield from _points(key, train, cos, 4)


def _points(key: str, steps: np.ndarray, values: np.ndarray, digits: int):
    """(key, step, value) for each point of one series, the value rounded to `digits`."""
    return ((key, int(s), round(float(v), digits)) for s, v in zip(steps, values))


def _accuracy_curve(run: Run, plan: _Plan, rng: np.random.Generator, steps: int):
    """(the base model's accuracy, the run's accuracy as a function of the step): a
    saturating rise, then (for a cliff) a collapse below the base model."""
    base = _BASE[(run.task, run.model)] + rng.normal(0, 0.01)
    gain = _GAIN[(run.workflow, run.task)] * _MODEL_SCALE[run.model] + rng.normal(0, 0.015)
    if run.sharing != SHARED:
        gain += 0.03  # isolated policies peak higher
    tau = 0.22 * steps

    def accuracy_at(s: np.ndarray) -> np.ndarray:
        a = base + gain * (1 - np.exp(-s / tau))
        if plan.cliff_at is not None:
            floor = max(0.02, 0.4 * base)
            a = np.where(s >= plan.cliff_at, floor + 0.04 * np.exp(-(s - plan.cliff_at) / 30), a)
        return a

    return base, accuracy_at


def _training_signals(
    plan: _Plan, accuracy: np.ndarray, rng: np.random.Generator, train: np.ndarray
) -> dict[str, np.ndarray]:
    """Reward, entropy, KL and response length at each training step: they follow the
    policy's accuracy; entropy collapses with it."""
    steps = len(train)
    reward = np.clip(accuracy + 0.04 + rng.normal(0, 0.03, steps), 0, 1)
    entropy = 1.2 * np.exp(-train / (1.5 * steps)) + rng.normal(0, 0.02, steps)
    kl = 0.002 * train / steps * 10 + np.abs(rng.normal(0, 0.002, steps))
    if plan.cliff_at is not None:
        after = train >= plan.cliff_at
        entropy = np.where(after, entropy * 0.35, entropy)
        kl = np.where(after, kl * 4, kl)
    resp_len = 18 + 4 * np.exp(-train / steps) + rng.normal(0, 0.6, steps)
    return {
        REWARD_KEY: reward,
        ENTROPY_KEY: entropy,
        KL_KEY: kl,
        RESP_LEN_KEY: resp_len,
    }


def _role_norm(
    run: Run, plan: _Plan, role: str, rng: np.random.Generator, train: np.ndarray
) -> np.ndarray:
    """One role's gradient norm at each step: a role level, slow decay, multiplicative
    noise; growth from the planned amplification onset, a ramp for a capturing role."""
    steps = len(train)
    level = _ROLE_LEVEL.get(role, 0.6)
    if role == _PARALLEL_ROLE.get(run.workflow):
        level *= 1.5  # three agents' turns land on this role
    for _attempt in range(50):
        g = level * (1 - 0.15 * train / steps) * np.exp(rng.normal(0, 0.06, steps))
        if role == plan.amplified and plan.amplify_at is not None:
            growth = np.minimum(12, 1.8 + 0.25 * (train - plan.amplify_at))
            g = g * np.where(train >= plan.amplify_at, growth, 1)
        elif plan.cliff_at is not None:
            g = g * np.where(train >= plan.cliff_at + 10, 1.6, 1)  # the collapse spreads
        if role == plan.capture:
            ramp = np.clip((train - 0.3 * steps) / (0.2 * steps), 0, 1)
            g = g * (1 + 1.5 * ramp)
        # Noise alone can pass the onset rule (3 points above median + 3 MAD) early; the
        # run whose answer tests rely on draws again until its onset is the planned one.
        if not (plan.known and role == plan.amplified):
            break
        if amplification_onset(train, g) == plan.amplify_at:
            break
    return g


def _shares(norms: dict[str, np.ndarray], sharing: str) -> dict[str, np.ndarray]:
    if sharing != SHARED:
        return {role: np.ones_like(g) for role, g in norms.items()}  # one role per policy
    total = sum(norms.values())
    return {role: g / total for role, g in norms.items()}


def _cosines(run: Run, plan: _Plan, train: np.ndarray, rng: np.random.Generator) -> dict:
    roles = WORKFLOW_TABLE[run.workflow].roles
    steps = len(train)
    if run.sharing == SHARED:
        pairs = [grad_cos_key(a, b) for a, b in itertools.combinations(roles, 2)]
        return {p: np.clip(0.15 + rng.normal(0, 0.07, steps), -1, 1) for p in pairs}
    parallel = _PARALLEL_ROLE.get(run.workflow)
    if parallel is None:
        return {}  # one agent per role: no two gradients share a policy
    agents = [f"{parallel}{i}" for i in range(3)]
    out = {}
    for a, b in itertools.combinations(agents, 2):
        cos = 0.55 + rng.normal(0, 0.05, steps)
        if plan.amplified == parallel and plan.amplify_at is not None:
            aligned = np.clip((train - plan.amplify_at + 10) / 10, 0, 1)
            cos = cos + (0.93 - 0.55) * aligned
        out[grad_cos_key(a, b)] = np.clip(cos, -1, 1)
    return out
