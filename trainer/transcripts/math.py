"""The warm-start transcripts of synthetic math: a 3 in a term is the learnable "misconception".

A worked answer is `12+7=\\boxed{19}`: each term right with P_EASY (P_HARD when it holds a
3), the sum with P_ADD, and the final answer boxed only with P_BOX (else a bare `12+7=19`,
the half-learned format habit RL can fix).
"""

from __future__ import annotations

import random
from collections import Counter

from trainer.tasks.answers import extract_boxed
from trainer.tasks.base import Problem, Subproblem
from trainer.tasks.math import MathTask
from trainer.transcripts import base
from trainer.transcripts.base import Writer


class MathWriter(Writer):
    @classmethod
    def solution(cls, rng: random.Random, problem: Problem) -> str:
        values = [
            base.noisy_value(rng, int(s.answer), _term_p(s.compact)) for s in problem.subproblems
        ]
        if len(values) == 1:
            return _final(rng, values[0])
        total = base.noisy_value(rng, sum(values), base.P_ADD)
        return f"{'+'.join(map(str, values))}={_final(rng, total)}"

    @classmethod
    def clean(cls, problem: Problem) -> str:
        return _boxed(problem.answer)

    @classmethod
    def same(cls, candidate: str, clean: str) -> bool:
        return candidate.endswith(clean)

    @classmethod
    def aggregate(cls, rng: random.Random, candidates: list[str], clean: str) -> str:
        """The majority answer with probability P_AGGREGATE, else any candidate's."""
        views = [MathTask.candidate_view(c) for c in candidates]
        majority = Counter(views).most_common(1)[0][0]
        pick = majority if rng.random() < base.P_AGGREGATE else rng.choice(views)
        return _boxed(pick)

    @classmethod
    def worker(cls, rng: random.Random, sub: Subproblem) -> str:
        return _boxed(base.noisy_value(rng, int(sub.answer), _term_p(sub.compact)))

    @classmethod
    def synthesis(cls, rng: random.Random, results: list[str]) -> str:
        values = [int(extract_boxed(r) or 0) for r in results]
        if len(values) == 1:
            return _final(rng, values[0])
        total = sum(values) if rng.random() < base.P_ADD else sum(values) + rng.choice(base.SLIPS)
        return f"{'+'.join(map(str, values))}={_final(rng, total)}"


def _boxed(value) -> str:
    return f"\\boxed{{{value}}}"


def _final(rng: random.Random, value) -> str:
    """A final answer: boxed with probability P_BOX, else bare (the learnable format habit)."""
    return _boxed(value) if rng.random() < base.P_BOX else str(value)


def _term_p(term: str) -> float:
    return base.P_HARD if "3" in term else base.P_EASY
