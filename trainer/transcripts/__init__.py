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

The package is the tiny models' side of each task, kept out of the `Task` classes:
`base.py` holds the probabilities and the `Writer` interface, `math.py` and `code.py` each
task's writer, named in `WRITERS` by task kind; this module asks them for every role's
completion and pairs it with its `TinyPrompts` prompt. The corpus feeds the tiny models' cache
key (`trainer/tiny.py`), so a change here that alters one character of it builds new models.
"""

from __future__ import annotations

import importlib
import random

from trainer.tasks.base import Problem
from trainer.transcripts import base
from trainer.transcripts.base import Writer
from trainer.workflows.prompts import TinyPrompts

# task kind -> "module:Writer subclass" (like `trainer.tasks.TASK_CLASSES`)
WRITERS = {
    "math": "trainer.transcripts.math:MathWriter",
    "code": "trainer.transcripts.code:CodeWriter",
}


def writer(task: str) -> type[Writer]:
    """The warm-start writer of `task`."""
    if task not in WRITERS:
        raise ValueError(f"no warm-start transcripts for task {task!r}; add one to WRITERS")
    module, name = WRITERS[task].split(":")
    return getattr(importlib.import_module(module), name)


def role_examples(rng: random.Random, problem: Problem, task: str) -> list[tuple[str, str]]:
    """(prompt, completion) pairs for every role of every workflow on one problem; what a
    completion looks like and how it goes wrong is the task's `Writer`."""
    kind = writer(task)
    prompts = TinyPrompts(task)
    clean = kind.clean(problem)
    examples = []
    # solver / generators (all paraphrase variants) and revisions
    for variant in range(4):
        examples.append((prompts.solve(problem, variant), kind.solution(rng, problem)))
    first = kind.solution(rng, problem)
    examples.append((prompts.revise(problem, first, "no"), kind.solution(rng, problem)))
    # aggregator
    candidates = [kind.solution(rng, problem) for _ in range(rng.choice((2, 3, 3, 4)))]
    examples.append(
        (prompts.aggregate(problem, candidates), kind.aggregate(rng, candidates, clean))
    )
    # evaluator
    candidate = kind.solution(rng, problem) if rng.random() < 0.7 else clean
    good = kind.same(candidate, clean)
    verdict = good if rng.random() < base.P_VERDICT else not good
    examples.append((prompts.evaluate(problem, candidate), "yes" if verdict else "no"))
    # orchestrator, workers, synthesizer
    parts = [s.compact for s in problem.subproblems]
    examples.append((prompts.orchestrate(problem, 3), _plan(rng, parts)))
    results = []
    for sub in problem.subproblems:
        result = kind.worker(rng, sub)
        examples.append((prompts.work(problem, sub.compact), result))
        results.append(result)
    synthesis = kind.synthesis(rng, results)
    examples.append((prompts.synthesize(problem, parts, results), synthesis))
    return examples


def _plan(rng: random.Random, parts: list[str]) -> str:
    roll = rng.random()
    if roll < base.P_PLAN or len(parts) == 1:
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
