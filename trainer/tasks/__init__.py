"""Tasks: datasets of problems, answer extraction and verifiers (code runs in `sandbox`).

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

import importlib
from typing import Any

from trainer.tasks.base import Problem, Subproblem, Task

__all__ = ["Problem", "Subproblem", "Task", "load_task", "task_class", "DATASETS", "TASK_CLASSES"]

# task name -> "module:Task subclass" (imported on first use: the web process reads the names
# and defaults without loading the code sandbox unless it needs one)
TASK_CLASSES = {
    "math": "trainer.tasks.math:MathTask",
    "code": "trainer.tasks.code:CodeTask",
}


def task_class(task: str) -> type[Task]:
    """The Task subclass of `task`: everything specific to it (see `Task`)."""
    if task not in TASK_CLASSES:
        raise ValueError(f"task must be one of {', '.join(TASK_CLASSES)}, not {task!r}")
    module, name = TASK_CLASSES[task].split(":")
    return getattr(importlib.import_module(module), name)


# dataset -> the task it serves (None: either)
DATASETS = {
    "synthetic": None,
    "gsm_symbolic": "math",
    "dapo_math": "math",
    "humaneval": "code",
    "deepcoder": "code",
}


def load_task(task: str, dataset: str = "synthetic", seed: int = 0, **knobs: Any) -> Task:
    """The Task for `task` (a name in TASK_CLASSES) on `dataset` (a name in DATASETS or a
    .jsonl path)."""
    task_class(task)  # a known task
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
    # imported here: the loaders import every task module, which the web process (reading
    # only names and defaults) never needs
    from trainer.tasks import datasets

    if dataset == "synthetic":
        return task_class(task).synthetic(seed, **knobs)
    if dataset == "humaneval":
        return datasets.load_humaneval(seed, **knobs)
    if dataset == "gsm_symbolic":
        return datasets.load_gsm_symbolic(seed, **knobs)
    if dataset == "dapo_math":
        return datasets.load_dapo_math(seed, **knobs)
    if dataset == "deepcoder":
        return datasets.load_deepcoder(seed, **knobs)
    return datasets.load_jsonl(dataset, task, seed, **knobs)
