"""Held-out evaluation: pass@1 of a workflow under a set of policies, and per-role scores.

Each problem is rolled out `eval_samples` times at `eval_temperature`; accuracy is the mean
reward over all of those episodes (avg@k: an estimate of pass@1 at that temperature). Greedy
evaluation (temperature 0) only sees the policy's argmax, which GRPO at the training
temperature seldom moves even while it raises the training reward (BENCHMARKS.md, "Does the
cpu-demo learn?"). Its standard error treats the problem as the unit: the k samples of one
problem are correlated, so a binomial error over k·n episodes would understate the noise.

Evaluation always uses the same problems (the first `eval_problems` distinct problems of the
test split: a split drawn with replacement repeats its few one-term synthetic problems, and
92 of the first 256 were 8 facts, so a single flipped fact moved accuracy by 0.045) and
seeds that depend only on the problem and the sample index (common random numbers), so two
evaluations differ only because the policies did. Per-role accuracy covers the roles whose
own output can be judged (a voter's answer, an evaluator's verdict).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict

from trainer.config import Config

# eval_problems.jsonl, torch-free so the web pages can read it too; re-exported here.
from trainer.eval_problems import PER_PROBLEM_FILE, read_per_problem, record_per_problem  # noqa: F401
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
    rollouts: list | None = None,
    engine=None,
    route=None,
) -> dict:
    """{"accuracy", "accuracy_se", "per_problem", "episodes", "turns", "tokens", "seconds",
    "roles": {role: accuracy}, "role_counts": {role: judged turns}}; `per_problem` is each
    problem's mean reward over its samples, in the order of `problems`, and `accuracy_se` the
    standard error of their mean. The scored episodes themselves (each problem's k samples
    together) are appended to `rollouts` when it is given (the trainer records some:
    `trainer/episode_log.py`). `route`: which policy plays each (agent, role), when it is not
    the config's sharing mode (a mix-and-match evaluation, trainer/mixed_eval.py)."""
    started = time.perf_counter()
    k = config.eval_samples
    episodes, turns, tokens = [], 0, 0
    # batch_size bounds the sequences of one generate call, whatever k is
    per_call = max(1, batch_size // k)
    for start in range(0, len(problems), per_call):
        chunk, stats = rollout(
            problems[start : start + per_call],
            k,
            config=config,
            policies=policies,
            codec=codec,
            prompts=prompts,
            task=task,
            temperature=config.eval_temperature,
            seed_parts=(config.seed, "eval"),
            engine=engine,
            route=route,
        )
        episodes += chunk
        tokens += stats.tokens
    scores: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        turns += len(ep.turns)
        for turn in ep.turns:
            if turn.score is not None:
                scores[turn.role].append(turn.score)
    # rollout returns the k samples of each problem together, in the order of `problems`
    if rollouts is not None:
        rollouts.extend(episodes)
    per_problem = [
        statistics.fmean(ep.reward for ep in episodes[i : i + k])
        for i in range(0, len(episodes), k)
    ]
    n = len(episodes)
    spread = statistics.stdev(per_problem) if len(per_problem) > 1 else 0.0
    return {
        "accuracy": sum(ep.reward for ep in episodes) / n if n else 0.0,
        "accuracy_se": spread / math.sqrt(len(per_problem)) if per_problem else 0.0,
        "per_problem": per_problem,
        "episodes": n,
        "turns": turns,
        "tokens": tokens,
        "seconds": round(time.perf_counter() - started, 3),
        "roles": {role: sum(v) / len(v) for role, v in sorted(scores.items())},
        "role_counts": {role: len(v) for role, v in sorted(scores.items())},
    }
