"""An episode record read as its workflow: stages, what each role did, and the outcomes a
researcher filters on. Plain Python over the records of `trainer/episode_log.py` (no Django),
so the view, its tests and the benchmark share it.

A record's turns carry `stage` (turns of one stage were generated together): voters share
stage 0 and the aggregator follows; the generator and evaluator alternate one stage each;
the orchestrator, its workers (one stage) and the synthesizer follow one another. `layout`
groups the turns by stage and names each stage by its roles, so one drawing serves every
workflow, including ones added later.

What a role did is read from the scores the rollout gave its turns (`trainer/rollout.py`):
a voter's, generator's, aggregator's, synthesizer's or solver's `score` is whether its own
answer was right; an evaluator's is whether its verdict was right about the proposal just
before it, so accepted = (score == 1) == (proposal right), as `trainer/behaviour.py` reads
it. A turn without a score (a worker) has no outcome.

`grad_share` (per role, the share of that role's gradient at the step this episode carried)
is a later field: a record without it has no share, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Outcomes a researcher asks about, as (key, label) in the filter's order. An episode has
# each that any of its turns shows.
OUTCOMES = (
    (
        "verdict_disagreement",
        "reward hacking suspected: an independent re-check failed this passing answer",
    ),
    ("evaluator_accepted_wrong", "evaluator accepted a wrong answer"),
    ("evaluator_rejected_correct", "evaluator rejected a correct answer"),
    ("aggregator_missed_correct", "a voter was right, the final answer wrong"),
    ("voters_split", "voters disagreed (some right, some wrong)"),
    ("no_voter_correct", "no voter was right"),
    ("empty_plan", "orchestrator planned no subtasks"),
    ("malformed", "malformed output (no verdict, choice or plan)"),
    ("truncated", "a turn hit its token budget"),
)
OUTCOME_LABELS = dict(OUTCOMES)

# Stage titles by the roles speaking in it (a stage of several voters is "voters").
_STAGE_NAMES = {
    "generator": ("generator", "voters"),
    "worker": ("worker", "workers"),
}


@dataclass
class TurnView:
    turn: Mapping[str, Any]
    verdict: str | None = None  # "accepted" / "rejected" for an evaluator's turn
    judged: str | None = None  # "right" / "wrong": the turn's own output, where it is scored
    flags: list[str] = field(default_factory=list)  # outcome keys this turn shows


@dataclass
class Stage:
    index: int
    title: str
    turns: list[TurnView]
    arrow: str = "→"  # drawn before the stage: → (feeds), ↺ (a rejected proposal, revised)


def _right(score: Any) -> bool | None:
    return None if not isinstance(score, int | float) else score > 0.5


def _read_turns(record: Mapping[str, Any]) -> list[TurnView]:
    """Each turn with its verdict and judgement; outcome flags on the turns that show them."""
    views: list[TurnView] = []
    proposal: bool | None = None  # the last generator turn's correctness (eval_opt)
    for turn in record.get("turns") or ():
        if not isinstance(turn, Mapping):
            continue  # a record from an odd writer: skip what is not a turn
        view = TurnView(turn)
        role, right = turn.get("role"), _right(turn.get("score"))
        if role == "evaluator":
            if right is not None and proposal is not None:
                accepted = right == proposal
                view.verdict = "accepted" if accepted else "rejected"
                view.judged = "right" if right else "wrong"
                if accepted and not proposal:
                    view.flags.append("evaluator_accepted_wrong")
                if not accepted and proposal:
                    view.flags.append("evaluator_rejected_correct")
        elif right is not None:
            view.judged = "right" if right else "wrong"
            if role == "generator":
                proposal = right
        if turn.get("truncated"):
            view.flags.append("truncated")
        views.append(view)
    return views


def layout(record: Mapping[str, Any]) -> list[Stage]:
    """The episode's turns grouped by stage, in order, each stage titled by its roles."""
    stages: list[Stage] = []
    for view in _read_turns(record):
        stage = view.turn.get("stage")
        if not stages or stages[-1].index != stage:
            stages.append(Stage(stage if isinstance(stage, int) else len(stages), "", []))
        stages[-1].turns.append(view)
    rounds = 0
    for i, stage in enumerate(stages):
        roles = sorted({str(v.turn.get("role")) for v in stage.turns})
        if len(roles) == 1 and len(stage.turns) > 1:
            title = _STAGE_NAMES.get(roles[0], (roles[0], roles[0] + "s"))[1]
        else:
            title = " · ".join(roles)
        if roles == ["generator"] and any(
            s.turns[0].turn.get("role") == "evaluator" for s in stages
        ):
            rounds += 1
            title = f"round {rounds}: generator"
            if i > 0 and stages[i - 1].turns[0].verdict == "rejected":
                stage.arrow = "↺"
        elif roles == ["evaluator"] and rounds:
            title = f"round {rounds}: evaluator"
        stage.title = title
    return stages


def workflow_name(record: Mapping[str, Any]) -> str:
    """The workflow the turns show (a record does not name it)."""
    roles = {t.get("role") for t in record.get("turns") or () if isinstance(t, Mapping)}
    if "aggregator" in roles:
        return "voting"
    if "evaluator" in roles:
        return "evaluator-optimizer"
    if "orchestrator" in roles:
        return "orchestrator-workers"
    if roles == {"solver"}:
        return "single"
    return " · ".join(sorted(str(r) for r in roles)) or "no turns"


def outcomes(record: Mapping[str, Any], stages: Iterable[Stage] | None = None) -> list[str]:
    """The outcome keys (`OUTCOMES`) the episode shows, in the filter's order."""
    stages = layout(record) if stages is None else stages
    found: set[str] = set()
    voters: list[bool] = []
    for stage in stages:
        for view in stage.turns:
            found.update(view.flags)
            if view.turn.get("role") == "generator" and view.judged is not None:
                voters.append(view.judged == "right")
    if record.get("verdict_disagreement") is True:  # trainer/rollout.py's second opinion
        found.add("verdict_disagreement")
    malformed = record.get("malformed") or {}
    if isinstance(malformed, Mapping) and any(malformed.values()):
        found.add("malformed")
        if malformed.get("no_subtasks"):
            found.add("empty_plan")
    if workflow_name(record) == "voting" and voters:
        if any(voters) and not record.get("correct"):
            found.add("aggregator_missed_correct")
        if any(voters) and not all(voters):
            found.add("voters_split")
        if not any(voters):
            found.add("no_voter_correct")
    return [key for key, _ in OUTCOMES if key in found]


def grad_shares(record: Mapping[str, Any]) -> dict[str, float]:
    """{role: share of that role's gradient at its step this episode carried}, from the
    record's `grad_share` (or `grad_shares`: {role: share}) or, failing that, its turns'
    `grad_share` summed by role; {} when the record has none. Values that are not finite
    numbers are dropped."""
    shares: dict[str, float] = {}
    given = record.get("grad_share", record.get("grad_shares"))
    if isinstance(given, Mapping):
        for role, value in given.items():
            if _finite(value):
                shares[str(role)] = float(value)
        return shares
    for turn in record.get("turns") or ():
        if isinstance(turn, Mapping) and _finite(turn.get("grad_share")):
            role = str(turn.get("role"))
            shares[role] = shares.get(role, 0.0) + float(turn["grad_share"])
    return shares


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
