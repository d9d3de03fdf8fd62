"""Behaviour metrics: what the agents did in a step's episodes, as ordinary metric series.

Curves of reward and gradient say that something changed; these say what the agents started
doing differently (docs/design.md §5, `behav/…` and `role/<role>/trunc_frac`):

- `behav/evaluator_accept_correct`, `behav/evaluator_accept_wrong`: the share of the
  evaluator's verdicts that accepted a correct, resp. a wrong, candidate (its calibration; an
  evaluator that accepts everything has both near 1). A verdict's candidate is the generator
  turn just before it; the rollout scored that turn's correctness and the verdict's rightness
  (`score` = accepted == correct), so accepted = (score == 1) == correct. A missing verdict
  counts as a rejection, as the workflow counts it.
- `behav/voter_agreement`: the share of voting episodes whose voters all gave the same
  answer (diversity collapse drives it to 1). Answers are compared after `extract` (a math
  task's boxed answer, a code task's program); a voter without an answer agrees with nobody.
- `behav/aggregator_follows_majority`: among voting episodes where more than half of the
  voters gave one answer, the share whose final answer is that answer.
- `behav/orchestrator_subtasks`: the mean number of workers the orchestrator's plan started.
- `role/<role>/trunc_frac`: the share of the role's turns that hit their token budget
  (`role/<role>/resp_len`, the mean response length, is logged by the update already).

A metric is logged only in steps with episodes it is defined on (no verdicts, no
`behav/evaluator_accept_*`). Pure Python over `trainer.episode` objects, no model.

Every metric is a ratio of two sums, so `behaviour_counts` (metric -> [numerator,
denominator]) can be summed over the ranks of a data-parallel run (`add_counts`) and turned
into the metrics one process would log (`from_counts`) without gathering any completion text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from trainer.episode import Episode
from vocabulary.names import (
    AGGREGATOR_FOLLOWS_KEY,
    EVALUATOR_ACCEPT_CORRECT_KEY,
    EVALUATOR_ACCEPT_WRONG_KEY,
    ORCHESTRATOR_SUBTASKS_KEY,
    TRUNC_FRAC,
    VOTER_AGREEMENT_KEY,
    role_key,
)

Extract = Callable[[str], "str | None"]


Counts = dict[str, list[float]]  # metric -> [numerator, denominator]


def behaviour_metrics(episodes: Sequence[Episode], extract: Extract) -> dict[str, float]:
    """Every behaviour metric the episodes define, keyed by its metric name."""
    return from_counts(behaviour_counts(episodes, extract))


def behaviour_counts(episodes: Sequence[Episode], extract: Extract) -> Counts:
    """Each metric's numerator and denominator over `episodes` (a metric they do not define
    is absent)."""
    out: Counts = {}
    for key, flags in {**_evaluator_calibration(episodes), **_voting(episodes, extract)}.items():
        if flags:
            out[key] = [float(sum(flags)), float(len(flags))]
    workers = [len(ep.turns_of("worker")) for ep in episodes if ep.turns_of("orchestrator")]
    if workers:
        out[ORCHESTRATOR_SUBTASKS_KEY] = [float(sum(workers)), float(len(workers))]
    truncated: dict[str, list[bool]] = defaultdict(list)
    for ep in episodes:
        for turn in ep.turns:
            truncated[turn.role].append(turn.truncated)
    for role, flags in sorted(truncated.items()):
        out[role_key(role, TRUNC_FRAC)] = [float(sum(flags)), float(len(flags))]
    return out


def add_counts(parts: Sequence[Counts]) -> Counts:
    """The counts of several ranks' episodes, summed."""
    total: Counts = {}
    for counts in parts:
        for key, (num, den) in counts.items():
            have = total.setdefault(key, [0.0, 0.0])
            have[0] += num
            have[1] += den
    return total


def from_counts(counts: Counts) -> dict[str, float]:
    return {key: num / den for key, (num, den) in counts.items() if den}


def _evaluator_calibration(episodes: Sequence[Episode]) -> dict[str, list[bool]]:
    accepted: dict[bool, list[bool]] = {True: [], False: []}  # candidate correct -> verdicts
    for ep in episodes:
        candidate = None
        for turn in ep.turns:
            if turn.role == "generator":
                candidate = turn
            elif turn.role == "evaluator" and candidate is not None:
                if candidate.score is None or turn.score is None:
                    continue  # unscored (never so after a rollout): nothing to calibrate
                correct = candidate.score > 0.5
                accepted[correct].append((turn.score > 0.5) == correct)
    return {
        EVALUATOR_ACCEPT_CORRECT_KEY: accepted[True],
        EVALUATOR_ACCEPT_WRONG_KEY: accepted[False],
    }


def _voting(episodes: Sequence[Episode], extract: Extract) -> dict[str, list[bool]]:
    agree: list[bool] = []
    follows: list[bool] = []
    for ep in episodes:
        if not ep.turns_of("aggregator"):
            continue  # not a voting episode
        answers = [extract(t.text) for t in ep.turns_of("generator")]
        if len(answers) < 2:
            continue  # one voter agrees with itself: no information
        agree.append(answers[0] is not None and len(set(answers)) == 1)
        counted = Counter(a for a in answers if a is not None)
        if counted:
            answer, votes = counted.most_common(1)[0]
            if votes * 2 > len(answers):
                final = extract(ep.answer) if ep.answer is not None else None
                follows.append(final == answer)
    return {VOTER_AGREEMENT_KEY: agree, AGGREGATOR_FOLLOWS_KEY: follows}
