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
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from trainer.episode import Episode
from trainer.names import role_key

Extract = Callable[[str], "str | None"]


def behaviour_metrics(episodes: Sequence[Episode], extract: Extract) -> dict[str, float]:
    """Every behaviour metric the episodes define, keyed by its metric name."""
    out: dict[str, float] = {}
    out.update(_evaluator_calibration(episodes))
    out.update(_voting(episodes, extract))
    workers = [len(ep.turns_of("worker")) for ep in episodes if ep.turns_of("orchestrator")]
    if workers:
        out["behav/orchestrator_subtasks"] = sum(workers) / len(workers)
    truncated: dict[str, list[bool]] = defaultdict(list)
    for ep in episodes:
        for turn in ep.turns:
            truncated[turn.role].append(turn.truncated)
    for role, flags in sorted(truncated.items()):
        out[role_key(role, "trunc_frac")] = sum(flags) / len(flags)
    return out


def _evaluator_calibration(episodes: Sequence[Episode]) -> dict[str, float]:
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
    out = {}
    if accepted[True]:
        out["behav/evaluator_accept_correct"] = sum(accepted[True]) / len(accepted[True])
    if accepted[False]:
        out["behav/evaluator_accept_wrong"] = sum(accepted[False]) / len(accepted[False])
    return out


def _voting(episodes: Sequence[Episode], extract: Extract) -> dict[str, float]:
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
    out = {}
    if agree:
        out["behav/voter_agreement"] = sum(agree) / len(agree)
    if follows:
        out["behav/aggregator_follows_majority"] = sum(follows) / len(follows)
    return out
