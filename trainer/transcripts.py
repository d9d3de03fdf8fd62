"""Synthetic role transcripts that warm-start the tiny models into every workflow's formats.

A randomly initialised model cannot follow a workflow, and a perfect one leaves RL nothing to
do. So each example is a (prompt, completion) pair made with the very `TinyPrompts` the
rollouts use, and its completion is right only with some probability:

- arithmetic/program steps are right with probability `P_EASY`, but only `P_HARD` on a
  learnable "misconception" feature (a 7 in a math term; `mod`/`square` in code), so the base
  model is systematically wrong on a predictable slice that RL can find and fix;
- aggregators follow the majority (or pick a correct program) most of the time;
- evaluators judge correctly most of the time and sometimes misjudge;
- orchestrators usually decompose faithfully and sometimes drop a part or babble.

Everything is drawn from `random.Random(seed)`, so the corpus — and the warm-started model —
is a pure function of the seed.
"""

from __future__ import annotations

import random
from collections import Counter

from trainer.tasks.base import Problem
from trainer.workflows.prompts import TinyPrompts

P_EASY = 0.85
P_HARD = 0.3
P_ADD = 0.9  # adding worker results correctly
P_AGGREGATE = 0.85
P_VERDICT = 0.8
P_PLAN = 0.9
_MATH_SLIPS = (-2, -1, 1, 2, 10, -10)
_CODE_OPS = ("add", "sub", "times", "mod")


def _noisy_value(rng: random.Random, value: int, p: float) -> int:
    return value if rng.random() < p else value + rng.choice(_MATH_SLIPS)


def _math_term_p(term: str) -> float:
    return P_HARD if "7" in term else P_EASY


def _boxed(value) -> str:
    return f"\\boxed{{{value}}}"


def math_solution(rng: random.Random, problem: Problem) -> str:
    """A worked answer `12+7=\\boxed{19}` whose steps are right only with some probability."""
    values = [
        _noisy_value(rng, int(s.answer), _math_term_p(s.compact)) for s in problem.subproblems
    ]
    if len(values) == 1:
        return _boxed(values[0])
    return f"{'+'.join(map(str, values))}={_boxed(_noisy_value(rng, sum(values), P_ADD))}"


def _code_stmt(rng: random.Random, sub) -> str:
    p = P_HARD if sub.compact.split()[0] in ("mod", "square") else P_EASY
    if rng.random() < p:
        return sub.answer
    op = rng.choice(_CODE_OPS)
    n = rng.randint(2, 9)
    return {"add": f"x=x+{n}", "sub": f"x=x-{n}", "times": f"x=x*{n}", "mod": f"x=x%{n}"}[op]


def program(stmts: list[str]) -> str:
    """The one-line program format the tiny models write."""
    return f"def f(x): {'; '.join(stmts)}; return x"


def code_solution(rng: random.Random, problem: Problem) -> str:
    return program([_code_stmt(rng, s) for s in problem.subproblems])


def _clean(problem: Problem, task: str) -> str:
    if task == "math":
        return _boxed(problem.answer)
    return program([s.answer for s in problem.subproblems])


def role_examples(rng: random.Random, problem: Problem, task: str) -> list[tuple[str, str]]:
    """(prompt, completion) pairs for every role of every workflow on one problem."""
    prompts = TinyPrompts(task)
    solve = math_solution if task == "math" else code_solution
    clean = _clean(problem, task)
    examples = []
    # solver / generators (all paraphrase variants) and revisions
    for variant in range(4):
        examples.append((prompts.solve(problem, variant), solve(rng, problem)))
    first = solve(rng, problem)
    examples.append((prompts.revise(problem, first, "no"), solve(rng, problem)))
    # aggregator
    candidates = [solve(rng, problem) for _ in range(rng.choice((2, 3, 3, 4)))]
    examples.append(
        (prompts.aggregate(problem, candidates), _aggregate(rng, task, candidates, clean))
    )
    # evaluator
    candidate = solve(rng, problem) if rng.random() < 0.7 else clean
    good = _same(task, candidate, clean)
    verdict = good if rng.random() < P_VERDICT else not good
    examples.append((prompts.evaluate(problem, candidate), "yes" if verdict else "no"))
    # orchestrator, workers, synthesizer
    parts = [s.compact for s in problem.subproblems]
    examples.append((prompts.orchestrate(problem, 3), _plan(rng, parts)))
    results = []
    for sub in problem.subproblems:
        if task == "math":
            result = _boxed(_noisy_value(rng, int(sub.answer), _math_term_p(sub.compact)))
        else:
            result = _code_stmt(rng, sub)
        examples.append((prompts.work(problem, sub.compact), result))
        results.append(result)
    examples.append((prompts.synthesize(problem, parts, results), _synthesis(rng, task, results)))
    return examples


def _same(task: str, candidate: str, clean: str) -> bool:
    return candidate.endswith(clean) if task == "math" else candidate == clean


def _aggregate(rng: random.Random, task: str, candidates: list[str], clean: str) -> str:
    from trainer.workflows.prompts import candidate_view

    if task == "math":
        views = [candidate_view(task, c) for c in candidates]
        majority = Counter(views).most_common(1)[0][0]
        pick = majority if rng.random() < P_AGGREGATE else rng.choice(views)
        return _boxed(pick)
    correct = [i for i, c in enumerate(candidates) if c == clean]
    if correct and rng.random() < P_AGGREGATE:
        return _boxed(correct[0] + 1)
    return _boxed(rng.randrange(len(candidates)) + 1)


def _plan(rng: random.Random, parts: list[str]) -> str:
    roll = rng.random()
    if roll < P_PLAN or len(parts) == 1:
        return ";".join(parts)
    dropped = list(parts)
    dropped.pop(rng.randrange(len(dropped)))
    return ";".join(dropped)


def _synthesis(rng: random.Random, task: str, results: list[str]) -> str:
    if task == "math":
        from trainer.tasks.answers import extract_boxed

        values = [int(extract_boxed(r) or 0) for r in results]
        if len(values) == 1:
            return _boxed(values[0])
        total = sum(values) if rng.random() < P_ADD else sum(values) + rng.choice(_MATH_SLIPS)
        return f"{'+'.join(map(str, values))}={_boxed(total)}"
    return program(results)


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
