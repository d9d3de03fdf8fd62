"""The warm-start transcripts of synthetic code: `mod` and `square` are the "misconception".

The tiny models write one-line programs (`def f(x): x=x+3; x=x*2; return x`); each statement
is right with P_EASY (P_HARD for `mod`/`square`), else a plausible wrong statement.
"""

from __future__ import annotations

import random

from trainer.tasks.base import Problem, Subproblem
from trainer.transcripts import base
from trainer.transcripts.base import Writer

SLIP_OPS = ("add", "sub", "times", "mod")  # the wrong statements a worker writes


def tiny_program(stmts: list[str]) -> str:
    """The one-line program format the tiny models write."""
    return f"def f(x): {'; '.join(stmts)}; return x"


class CodeWriter(Writer):
    @classmethod
    def solution(cls, rng: random.Random, problem: Problem) -> str:
        return tiny_program([cls.worker(rng, s) for s in problem.subproblems])

    @classmethod
    def clean(cls, problem: Problem) -> str:
        return tiny_program([s.answer for s in problem.subproblems])

    @classmethod
    def aggregate(cls, rng: random.Random, candidates: list[str], clean: str) -> str:
        """The number of a correct candidate with probability P_AGGREGATE, else any number."""
        correct = [i for i, c in enumerate(candidates) if c == clean]
        if correct and rng.random() < base.P_AGGREGATE:
            return f"\\boxed{{{correct[0] + 1}}}"
        return f"\\boxed{{{rng.randrange(len(candidates)) + 1}}}"

    @classmethod
    def worker(cls, rng: random.Random, sub: Subproblem) -> str:
        """One statement: right with P_EASY (P_HARD for mod/square), else a wrong one."""
        p = base.P_HARD if sub.compact.split()[0] in ("mod", "square") else base.P_EASY
        if rng.random() < p:
            return sub.answer
        op = rng.choice(SLIP_OPS)
        n = rng.randint(2, 9)
        return {"add": f"x=x+{n}", "sub": f"x=x-{n}", "times": f"x=x*{n}", "mod": f"x=x%{n}"}[op]

    @classmethod
    def synthesis(cls, rng: random.Random, results: list[str]) -> str:
        return tiny_program(results)
