"""Held-out evaluation: pass@1 of a workflow under a set of policies, and per-role scores.

Evaluation always uses the same problems (the first `eval_problems` distinct problems of the
test split: a split drawn with replacement repeats its few one-term synthetic problems, and
92 of the first 256 were 8 facts, so a single flipped fact moved accuracy by 0.045) and
seeds that depend only on the problem, so two evaluations differ only because the policies
did. Per-role accuracy covers the roles whose own output can be judged (a voter's answer, an
evaluator's verdict).
"""

from __future__ import annotations

import time
from collections import defaultdict

from trainer.config import Config
from trainer.rollout import Codec, rollout
from trainer.tasks.base import Problem, Task


def held_out(task: Task, n: int) -> list[Problem]:
    """The first n distinct problems (by text) of the test split; cycled only when the split
    has fewer than n distinct problems."""
    problems, seen = [], set()
    for problem in task.problems("test"):
        if problem.compact not in seen:
            seen.add(problem.compact)
            problems.append(problem)
            if len(problems) == n:
                return problems
    return [problems[i % len(problems)] for i in range(n)]


def evaluate(
    config: Config,
    *,
    policies,
    codec: Codec,
    prompts,
    task: Task,
    problems: list[Problem],
    batch_size: int = 256,
) -> dict:
    """{"accuracy", "episodes", "turns", "tokens", "seconds", "roles": {role: accuracy}}."""
    started = time.perf_counter()
    episodes, turns, tokens = [], 0, 0
    for start in range(0, len(problems), batch_size):
        chunk, stats = rollout(
            problems[start : start + batch_size],
            1,
            config=config,
            policies=policies,
            codec=codec,
            prompts=prompts,
            task=task,
            temperature=config.eval_temperature,
            seed_parts=(config.seed, "eval"),
        )
        episodes += chunk
        tokens += stats.tokens
    scores: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        turns += len(ep.turns)
        for turn in ep.turns:
            if turn.score is not None:
                scores[turn.role].append(turn.score)
    n = len(episodes)
    return {
        "accuracy": sum(ep.reward for ep in episodes) / n if n else 0.0,
        "episodes": n,
        "turns": turns,
        "tokens": tokens,
        "seconds": round(time.perf_counter() - started, 3),
        "roles": {role: sum(v) / len(v) for role, v in sorted(scores.items())},
    }
