"""Math tasks: a boxed final answer, scored by exact (rational) comparison with the gold answer.

`MathTask` wraps any list of math problems (synthetic, GSM-Symbolic, DAPO-Math, a JSONL
file). The built-in synthetic dataset is what the CPU demo trains on:

- a problem is a sum of k independent terms (k in `min_terms`..`max_terms`, default 1..3),
  each `a*b` or `a+b` with 1 <= a, b <= `max_operand` (default 5: the tiny models cannot
  add two-digit values reliably, and a task they fail at leaves RL nothing to find); compact form
  `(3*4)+(5+2)`, a single term without parentheses (`3*4`);
- `answer` is the value as a decimal integer; `subproblems` are the terms (compact `3*4`,
  answer `12`), the pieces an Orch-Workers orchestrator should hand out;
- splits are fixed-size (train 20,000, test 1,000) and generated lazily but
  deterministically from `random.Random` seeded with (seed, split);
- train and test are disjoint by problem text: for each number of terms, ~5% of all
  possible problem texts (chosen by a stable hash, see `StratumSplit`) form the test pool and
  the rest the train pool, and each split draws only from its pool. Only when a pool cannot
  exist (a single possible problem) does a draw fall back to any problem, after
  `MAX_REDRAWS` tries.
"""

from __future__ import annotations

import functools
import random

from trainer.tasks.answers import answers_match, extract_boxed
from trainer.tasks.base import SYNTHETIC_SIZES, Problem, Subproblem, Task, synthetic_splits


class MathTask(Task):
    """Problems with a canonical final answer; a completion scores 1.0 when its last
    \\boxed{} matches it (`answers_match`)."""

    name = "math"
    max_rounds = 3
    paper_dataset = "dapo_math"
    answer_rule = "Put the final answer in \\boxed{}."
    aggregate_rule = "Decide which final answer is correct and put it in \\boxed{}."

    def extract(self, completion: str) -> str | None:
        return extract_boxed(completion)

    def score(self, problem: Problem, completion: str) -> float:
        return 1.0 if answers_match(self.extract(completion), problem.answer) else 0.0

    @classmethod
    def candidate_view(cls, completion: str) -> str:
        return extract_boxed(completion) or "?"  # the boxed answer is all that matters

    @classmethod
    def result_view(cls, completion: str) -> str:
        return extract_boxed(completion) or "?"

    @classmethod
    def tiny_candidates(cls, views: list[str]) -> str:
        return f"\nC:{'|'.join(views)}"

    @classmethod
    def from_row(cls, row: dict, problem_id: str, question: str, where: str, source: str):
        if "answer" not in row:
            raise ValueError(f"{where}: a math row needs an 'answer'")
        return Problem(problem_id, question, question, str(row["answer"]), meta={"source": source})

    @classmethod
    def synthetic(cls, seed: int, **knobs) -> MathTask:
        return synthetic_math(seed, **knobs)


def synthetic_math(
    seed: int = 0,
    *,
    min_terms: int = 1,
    max_terms: int = 3,
    max_operand: int = 5,
    train_size: int = SYNTHETIC_SIZES["train"],
    test_size: int = SYNTHETIC_SIZES["test"],
) -> MathTask:
    """The built-in arithmetic dataset (see the module docstring)."""
    if not 1 <= min_terms <= max_terms:
        raise ValueError(f"need 1 <= min_terms <= max_terms, got {min_terms}..{max_terms}")
    if max_operand < 1:
        raise ValueError(f"max_operand must be at least 1, got {max_operand}")
    all_terms = [
        (a, op, b)
        for a in range(1, max_operand + 1)
        for op in "*+"
        for b in range(1, max_operand + 1)
    ]
    splits = synthetic_splits(
        "math",
        seed,
        {"train": int(train_size), "test": int(test_size)},
        range(min_terms, max_terms + 1),
        all_terms,
        compact=_compact,
        draw=lambda rng, k: _draw_terms(rng, k, max_operand),
        build=lambda problem_id, terms, rng: _math_problem(problem_id, terms),
    )
    return MathTask("synthetic", splits, seed)


def _draw_terms(rng: random.Random, k: int, operand: int) -> list[tuple]:
    r = rng.random  # uniform draws via random(): several times faster than randint/choice
    return [
        (1 + int(r() * operand), "*" if r() < 0.5 else "+", 1 + int(r() * operand))
        for _ in range(k)
    ]


def _compact(terms: list[tuple]) -> str:
    if len(terms) == 1:
        a, op, b = terms[0]
        return f"{a}{op}{b}"
    return "+".join(f"({a}{op}{b})" for a, op, b in terms)


@functools.cache
def _term(a: int, op: str, b: int) -> Subproblem:
    # Few distinct terms exist (2 * max_operand**2), so each Subproblem is built once.
    value = a * b if op == "*" else a + b
    return Subproblem(compact=f"{a}{op}{b}", question=f"Compute {a}{op}{b}.", answer=str(value))


def _math_problem(problem_id: str, terms: list[tuple]) -> Problem:
    subproblems = tuple(_term(*t) for t in terms)
    compact = _compact(terms)
    return Problem(
        id=problem_id,
        question=f"Compute {compact}. Put the final answer in \\boxed{{}}.",
        compact=compact,
        answer=str(sum(int(s.answer) for s in subproblems)),
        subproblems=subproblems,
        meta={"source": "synthetic", "terms": len(terms)},
    )
