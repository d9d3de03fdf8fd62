"""Synthetic role transcripts that warm-start the tiny models into every workflow's formats.

A randomly initialised model cannot follow a workflow, and a perfect one leaves RL nothing to
do. So each example is a (prompt, completion) pair made with the very `TinyPrompts` the
rollouts use, and its completion is right only with some probability:

- arithmetic/program steps are right with probability `P_EASY`, but only `P_HARD` on a
  learnable "misconception" feature (a 3 in a math term; `mod`/`square` in code), so the base
  model is systematically wrong on a predictable slice that RL can find and fix;
- a final math answer is boxed only with probability `P_BOX` (a half-learned format habit).
  Unlike a term's facts, the habit belongs to no problem, so what RL teaches about it carries
  over to problems it never trained on: it is what makes the cpu-demo's held-out accuracy
  rise (BENCHMARKS.md, "Does the cpu-demo learn?"). Evaluation samples (avg@k at T=0.7), so
  the rise is smooth, not a greedy flip at one half;
- aggregators follow the majority (or pick a correct program) most of the time;
- evaluators judge correctly most of the time and sometimes misjudge;
- orchestrators usually decompose faithfully and sometimes drop a part or babble.

Everything is drawn from `random.Random(seed)`, so the corpus — and the warm-started model —
is a pure function of the seed.
"""

from __future__ import annotations

import random

from trainer.tasks import task_class
from trainer.tasks.base import Problem
from trainer.workflows.prompts import TinyPrompts

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


def role_examples(rng: random.Random, problem: Problem, task: str) -> list[tuple[str, str]]:
    """(prompt, completion) pairs for every role of every workflow on one problem; what a
    completion looks like and how it goes wrong is the task's (`Task.warm_*`)."""
    kind = task_class(task)
    prompts = TinyPrompts(task)
    clean = kind.warm_clean(problem)
    examples = []
    # solver / generators (all paraphrase variants) and revisions
    for variant in range(4):
        examples.append((prompts.solve(problem, variant), kind.warm_solution(rng, problem)))
    first = kind.warm_solution(rng, problem)
    examples.append((prompts.revise(problem, first, "no"), kind.warm_solution(rng, problem)))
    # aggregator
    candidates = [kind.warm_solution(rng, problem) for _ in range(rng.choice((2, 3, 3, 4)))]
    examples.append(
        (prompts.aggregate(problem, candidates), kind.warm_aggregate(rng, candidates, clean))
    )
    # evaluator
    candidate = kind.warm_solution(rng, problem) if rng.random() < 0.7 else clean
    good = kind.warm_same(candidate, clean)
    verdict = good if rng.random() < P_VERDICT else not good
    examples.append((prompts.evaluate(problem, candidate), "yes" if verdict else "no"))
    # orchestrator, workers, synthesizer
    parts = [s.compact for s in problem.subproblems]
    examples.append((prompts.orchestrate(problem, 3), _plan(rng, parts)))
    results = []
    for sub in problem.subproblems:
        result = kind.warm_worker(rng, sub)
        examples.append((prompts.work(problem, sub.compact), result))
        results.append(result)
    synthesis = kind.warm_synthesis(rng, results)
    examples.append((prompts.synthesize(problem, parts, results), synthesis))
    return examples


def _plan(rng: random.Random, parts: list[str]) -> str:
    roll = rng.random()
    if roll < P_PLAN or len(parts) == 1:
        return ";".join(parts)
    dropped = list(parts)
    dropped.pop(rng.randrange(len(dropped)))
    return ";".join(dropped)


def corpus(
    math_problems: list[Problem], code_problems: list[Problem], seed: int
) -> list[tuple[str, str]]:
    """The whole warm-start corpus, shuffled deterministically."""
    rng = random.Random(seed)
    examples = []
    for problem in math_problems:
        examples += role_examples(rng, problem, "math")
    for problem in code_problems:
        examples += role_examples(rng, problem, "code")
    rng.shuffle(examples)
    return examples
