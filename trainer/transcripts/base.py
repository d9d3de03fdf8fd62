"""How the tiny models' warm-start transcripts go wrong, and what a task's writer provides.

The probabilities below are the whole noise model (see `trainer.transcripts`): a task's
`Writer` draws from them, so tuning one changes every task's corpus alike. Writers read them
as `base.P_…` at call time, so a test can change one and see the corpus follow.
"""

from __future__ import annotations

import random

from trainer.tasks.base import Problem, Subproblem

P_EASY = 0.85
P_HARD = 0.3
P_ADD = 0.9  # adding worker results correctly
P_BOX = 0.5  # a final math answer ends in \boxed{} (else bare, `=19`, which scores 0)
P_AGGREGATE = 0.85
P_VERDICT = 0.8
P_PLAN = 0.9
SLIPS = (-2, -1, 1, 2, 10, -10)  # how a wrong number is off


def noisy_value(rng: random.Random, value: int, p: float) -> int:
    """`value` with probability p, else off by one of SLIPS."""
    return value if rng.random() < p else value + rng.choice(SLIPS)


class Writer:
    """What a completion of each role looks like for one task, and how it goes wrong.

    `trainer.transcripts.role_examples` asks a task's writer for every role's completion; the
    prompts come from `TinyPrompts`. A subclass per task, named in `trainer.transcripts.WRITERS`.
    """

    @classmethod
    def solution(cls, rng: random.Random, problem: Problem) -> str:
        """A worked answer whose steps are right only with some probability."""
        raise NotImplementedError

    @classmethod
    def clean(cls, problem: Problem) -> str:
        """The correct completion."""
        raise NotImplementedError

    @classmethod
    def same(cls, candidate: str, clean: str) -> bool:
        """Whether a candidate is as good as the correct completion."""
        return candidate == clean

    @classmethod
    def aggregate(cls, rng: random.Random, candidates: list[str], clean: str) -> str:
        """An aggregator's completion over `candidates`."""
        raise NotImplementedError

    @classmethod
    def worker(cls, rng: random.Random, sub: Subproblem) -> str:
        """A worker's completion for one subproblem."""
        raise NotImplementedError

    @classmethod
    def synthesis(cls, rng: random.Random, results: list[str]) -> str:
        """A synthesizer's completion from the workers' results."""
        raise NotImplementedError
