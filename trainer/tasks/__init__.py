"""Tasks: datasets of problems, answer extraction, verifiers and the code sandbox.

    task = load_task("math")                      # synthetic arithmetic, seed 0
    task = load_task("code", "humaneval")
    task = load_task("math", "data/mine.jsonl")
    problems = task.sample("train", 64, seed=step)
    rewards = task.score_many(problems, completions)

`load_task(task, dataset, seed, **knobs)` knobs:
- synthetic math: `min_terms`, `max_terms` (1..3), `max_operand` (9), `train_size`,
  `test_size`;
- synthetic code: `min_ops`, `max_ops` (1..3; `min_terms`/`max_terms` are accepted as the
  same thing), `max_operand` (9), `train_size`, `test_size`;
- gsm_symbolic: `train_size` (5,000), `test_size` (500);
- any code task: `timeout` (seconds per program), `memory_mb`, `workers` (sandbox
  processes at once).

For the synthetic datasets `seed` seeds the generator; loaded datasets have fixed splits and
only keep the seed.
"""

from __future__ import annotations

from typing import Any

from trainer.tasks.base import Problem, Subproblem, Task

__all__ = ["Problem", "Subproblem", "Task", "load_task", "DATASETS"]

# dataset -> the task it serves (None: either)
DATASETS = {
    "synthetic": None,
    "gsm_symbolic": "math",
    "dapo_math": "math",
    "humaneval": "code",
    "deepcoder": "code",
}


def load_task(task: str, dataset: str = "synthetic", seed: int = 0, **knobs: Any) -> Task:
    """The Task for `task` ("math" | "code") on `dataset` (a name in DATASETS or a .jsonl path)."""
    if task not in ("math", "code"):
        raise ValueError(f"task must be 'math' or 'code', not {task!r}")
    wanted = DATASETS.get(dataset, "path" if str(dataset).endswith(".jsonl") else "unknown")
    if wanted == "unknown":
        raise ValueError(
            f"dataset {dataset!r} is not one of {', '.join(DATASETS)} or a path to a .jsonl file"
        )
    if wanted not in (None, "path", task):
        raise ValueError(f"dataset {dataset!r} is a {wanted} dataset, but task is {task!r}")
    try:
        return _load(task, dataset, int(seed), knobs)
    except TypeError as exc:  # an unknown knob for this dataset
        raise ValueError(f"bad option for {task}/{dataset}: {exc}") from None


def _load(task: str, dataset: str, seed: int, knobs: dict[str, Any]) -> Task:
    from trainer.tasks import datasets

    if dataset == "synthetic":
        if task == "math":
            from trainer.tasks.math import synthetic_math

            return synthetic_math(seed, **knobs)
        from trainer.tasks.code import synthetic_code

        for alias, name in (("min_terms", "min_ops"), ("max_terms", "max_ops")):
            if alias in knobs:
                knobs.setdefault(name, knobs.pop(alias))
        return synthetic_code(seed, **knobs)
    if dataset == "humaneval":
        return datasets.load_humaneval(seed, **knobs)
    if dataset == "gsm_symbolic":
        return datasets.load_gsm_symbolic(seed, **knobs)
    if dataset == "dapo_math":
        return datasets.load_dapo_math(seed, **knobs)
    if dataset == "deepcoder":
        return datasets.load_deepcoder(seed, **knobs)
    return datasets.load_jsonl(dataset, task, seed, **knobs)
