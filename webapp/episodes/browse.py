"""What the episode pages show, read from the request and the store: which steps a run
recorded, which step to show, the step's episodes filtered, sorted and grouped by problem (a
GRPO group), and the probe problem's episodes at chosen steps.

A parameter that cannot be read raises `BadQuery` naming it (the pages answer 400 with the
message); a step with nothing recorded is not an error: the pages say so and offer the
nearest recorded steps. Records are unpacked once per page and read as workflows by
`webapp/episodes/workflow.py`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.config import INT_MAX
from webapp.episodes.models import Episode
from webapp.episodes.store import Filters, matches, records, select
from webapp.episodes.workflow import OUTCOME_LABELS, grad_shares, layout, outcomes, workflow_name
from webapp.ids import whole_number

FOLD_CHARS = 600  # characters of a long text shown before the fold
SNIPPET_CHARS = 90  # of an episode's final answer on its card
MAX_STEP_EPISODES = 512  # read at most this many of one step (a step records 16 by default)
MAX_QUERY = 200  # characters of a text search
MAX_STEPS_COMPARED = 6
MAX_RUNS_COMPARED = 4
KIND_NAMES = {Episode.TRAIN: "training", Episode.EVAL: "evaluation"}


class BadQuery(ValueError):
    """A parameter the pages cannot read: `name` and what it should be."""

    def __init__(self, name: str, expected: str):
        super().__init__(f"{name}: {expected}")
        self.name, self.expected = name, expected


# --- reading parameters ---------------------------------------------------------------------


def whole(query: Mapping[str, str], name: str, high: int = INT_MAX) -> int | None:
    raw = (query.get(name) or "").strip()
    if not raw:
        return None
    number = whole_number(raw)
    if number is None or number > high:
        raise BadQuery(name, f"a whole number from 0 to {high}")
    return number


def kind_of(query: Mapping[str, str]) -> str | None:
    kind = query.get("kind") or None
    if kind is not None and kind not in Episode.KINDS:
        raise BadQuery("kind", "train or eval")
    return kind


def ids(query: Mapping[str, str], name: str, most: int) -> list[int]:
    """A comma-separated list of whole numbers, at most `most`, in order, without repeats."""
    raw = (query.get(name) or "").strip()
    if not raw:
        return []
    numbers = [whole_number(p) for p in raw.split(",") if p.strip()]
    if len(numbers) > most or None in numbers:
        raise BadQuery(name, f"at most {most} whole numbers separated by commas")
    return list(dict.fromkeys(numbers))


def problem_of(query: Mapping[str, str]) -> str | None:
    problem = query.get("problem") or None
    if problem is not None and len(problem) > 200:
        raise BadQuery("problem", "a problem id (at most 200 characters)")
    return problem


@dataclass(frozen=True)
class StepFilters:
    correct: bool | None = None
    outcome: str | None = None
    truncated: bool = False
    q: str | None = None
    sort: str = ""  # "", "reward", "-reward" or "share:<role>"

    @classmethod
    def read(cls, query: Mapping[str, str]) -> StepFilters:
        correct = query.get("correct") or None
        if correct not in (None, "correct", "incorrect"):
            raise BadQuery("correct", "correct or incorrect")
        outcome = query.get("outcome") or None
        if outcome is not None and outcome not in OUTCOME_LABELS:
            raise BadQuery("outcome", "one of " + ", ".join(OUTCOME_LABELS))
        q = query.get("q") or None
        if q is not None and len(q) > MAX_QUERY:
            raise BadQuery("q", f"at most {MAX_QUERY} characters")
        sort = query.get("sort") or ""
        if sort not in ("", "reward", "-reward") and not (
            sort.startswith("share:") and 6 < len(sort) <= 60
        ):
            raise BadQuery("sort", "reward, -reward or share:<role>")
        return cls(
            correct=None if correct is None else correct == "correct",
            outcome=outcome,
            truncated=query.get("truncated") in ("1", "on", "true"),
            q=q,
            sort=sort,
        )

    @property
    def active(self) -> bool:
        return bool(self.correct is not None or self.outcome or self.truncated or self.q)

    def keep(self, card: Card) -> bool:
        if self.correct is not None and card.correct != self.correct:
            return False
        if self.outcome and self.outcome not in card.outcomes:
            return False
        if self.truncated and "truncated" not in card.outcomes:
            return False
        return not self.q or matches(card.record, self.q)


# --- which step ---------------------------------------------------------------------------------


def nearest(steps: Sequence[int], step: int) -> int | None:
    """The recorded step closest to `step` (the earlier one on a tie); None when none."""
    if not steps:
        return None
    i = bisect.bisect_left(steps, step)
    return min(steps[max(i - 1, 0) : i + 1], key=lambda s: (abs(s - step), s))


@dataclass
class Chosen:
    kind: str | None
    step: int | None
    note: str = ""  # why this is not what was asked for
    empty: bool = False  # asked for a step with nothing recorded: show nothing, say so
    around: list[tuple[str, int]] = field(default_factory=list)  # recorded steps near it


def choose_step(query: Mapping[str, str], recorded: list[tuple[str, int]]) -> Chosen:
    """The step to show: the asked one (snapped to the nearest recorded one with `near`, as a
    click on a curve asks), else the latest recorded step."""
    query = dict(query.items())
    if query.get("at"):  # the page's step picker: "kind:step"
        query["kind"], _, query["step"] = query["at"].partition(":")
    kind, step = kind_of(query), whole(query, "step")
    if not recorded:
        return Chosen(kind, step, empty=True)
    if step is None:
        pool = [p for p in recorded if kind is None or p[0] == kind] or recorded
        return Chosen(*pool[-1])
    kinds = [kind] if kind else [Episode.TRAIN, Episode.EVAL]
    if any((k, step) in recorded for k in kinds):
        return Chosen(next(k for k in kinds if (k, step) in recorded), step)
    pool = [s for k, s in recorded if k in kinds]
    close = nearest(pool, step)
    what = KIND_NAMES[kind] + " " if kind else ""
    if query.get("near") and close is not None:
        k = next(k for k in kinds if (k, close) in recorded)
        return Chosen(k, close, note=f"No {what}episodes at step {step}: the nearest is {close}.")
    by_distance = sorted((p for p in recorded if p[0] in kinds), key=lambda p: abs(p[1] - step))
    around = sorted(by_distance[:6], key=lambda p: (p[1], p[0]))
    return Chosen(kind, step, empty=True, around=around)


# --- an episode as the pages draw it -----------------------------------------------------------


@dataclass(frozen=True)
class Text:
    head: str
    rest: str  # "" when the text fits before the fold


def folded(text: Any) -> Text:
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    return Text(text[:FOLD_CHARS], text[FOLD_CHARS:])


@dataclass
class Card:
    """One episode: its row's columns, its record, and the record read as a workflow."""

    id: int
    kind: str
    step: int
    problem_id: str
    sample: int
    correct: bool
    reward: float | None
    record: dict[str, Any]
    workflow: str = ""
    stages: list = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)
    shown: bool = True  # matches the filters (a group shows its other samples dimmed)
    href: str = ""  # the page's link that opens it

    @classmethod
    def of(cls, record: dict[str, Any]) -> Card:
        stages = layout(record)
        return cls(
            id=record["id"],
            kind=str(record.get("kind")),
            step=int(record.get("step") or 0),
            problem_id=str(record.get("problem_id")),
            sample=int(record.get("sample") or 0),
            correct=bool(record.get("correct")),
            reward=record.get("reward"),
            record=record,
            workflow=workflow_name(record),
            stages=stages,
            outcomes=outcomes(record, stages),
            shares=grad_shares(record),
        )

    @property
    def outcome_labels(self) -> list[tuple[str, str]]:
        return [(key, OUTCOME_LABELS[key]) for key in self.outcomes]

    @property
    def snippet(self) -> str:
        answer = self.record.get("answer")
        text = " ".join(answer.split()) if isinstance(answer, str) else ""
        return text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")

    @property
    def chips(self) -> list[dict[str, Any]]:
        """Each turn in short: agent, advantage, judged right/wrong, truncated."""
        return [
            {
                "agent": view.turn.get("agent") or view.turn.get("role"),
                "advantage": view.turn.get("advantage"),
                "judged": view.judged,
                "verdict": view.verdict,
                "truncated": bool(view.turn.get("truncated")),
            }
            for stage in self.stages
            for view in stage.turns
        ]

    def share_lines(self) -> list[str]:
        return [
            f"carried {_percent(s)} of the {role}'s gradient" for role, s in self.shares.items()
        ]


def _percent(share: float) -> str:
    """ "12%"; a share that rounds to 0 is "0%", never "-0%" (a float a hair below 0)."""
    return f"{share if round(share, 2) != 0 else 0.0:.0%}"


def detail(card: Card) -> dict[str, Any]:
    """The opened episode: every stage with its turns' texts folded."""
    stages = []
    for stage in card.stages:
        turns = []
        for view in stage.turns:
            turn = view.turn
            turns.append(
                {
                    **turn,
                    "verdict": view.verdict,
                    "judged": view.judged,
                    "flags": [OUTCOME_LABELS[f] for f in view.flags if f != "truncated"],
                    "share": card.shares.get(str(turn.get("role"))),
                    "prompt": folded(turn.get("prompt")),
                    "completion": folded(turn.get("completion")),
                }
            )
        stages.append({"title": stage.title, "arrow": stage.arrow, "turns": turns})
    return {"card": card, "stages": stages, "answer": folded(card.record.get("answer"))}


def cards(rows) -> list[Card]:
    return [Card.of(record) for record in records(rows)]


def step_cards(run_id: int, kind: str, step: int) -> list[Card]:
    return cards(select(run_id, Filters(kind=kind, step=step))[:MAX_STEP_EPISODES])


def sort_cards(shown: list[Card], sort: str) -> list[Card]:
    if sort in ("reward", "-reward"):
        return sorted(
            shown,
            key=lambda c: c.reward if c.reward is not None else -1e9,
            reverse=sort == "reward",
        )
    if sort.startswith("share:"):
        role = sort[len("share:") :]
        return sorted(shown, key=lambda c: -c.shares.get(role, -1.0))
    return shown


@dataclass
class Group:
    problem_id: str
    cards: list[Card]

    @property
    def right(self) -> int:
        return sum(c.correct for c in self.cards)

    @property
    def mean_reward(self) -> float | None:
        rewards = [c.reward for c in self.cards if isinstance(c.reward, int | float)]
        return sum(rewards) / len(rewards) if rewards else None


def groups(all_cards: list[Card], filters: StepFilters) -> list[Group]:
    """The GRPO groups (one problem's samples) with at least one episode the filters keep,
    every sample of each shown (those filtered out dimmed); ordered by `filters.sort` applied
    to the kept episodes (the group of the first comes first), else by position."""
    by_problem: dict[str, list[Card]] = {}
    for card in all_cards:
        card.shown = filters.keep(card)
        by_problem.setdefault(card.problem_id, []).append(card)
    kept = sort_cards([c for c in all_cards if c.shown], filters.sort)
    order = list(dict.fromkeys(c.problem_id for c in kept))
    out = []
    for problem in order:
        members = by_problem[problem]
        if filters.sort:
            members = sort_cards(members, filters.sort)
        out.append(Group(problem, members))
    return out


def roles_with_shares(all_cards: list[Card]) -> list[str]:
    return sorted({role for card in all_cards for role in card.shares})
