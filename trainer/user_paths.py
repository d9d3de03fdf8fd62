"""Which files on the server a config from a signed-in user may name (docs/security.md).

A config's `model` may be a local directory and its `dataset` a `.jsonl` file. From the
operator's command line any will do; from the pages, the API, or a queued run a worker takes,
only one the operator put in the data directory's folders for them: a model directory in
`models/`, a dataset file in `datasets/` (where the named datasets `dapo_math` and
`deepcoder` live). Compared by real path, so no `..` or link leads elsewhere, and a path
outside gets the same answer whether or not it exists: nothing a user sends reads, or tells
them of, another file of the server (an artifact someone uploaded, another run's folder).

Standard library only: the web server checks before it stores a run, and the worker again
before it trains one, whatever an older row says.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

LOCAL_PATH_PREFIXES = ("/", "./", "../", "~")  # trainer.config's test for a local model path
MODELS, DATASETS = "models", "datasets"  # the operator's folders in the data directory


def is_local_model(model: str) -> bool:
    return model.startswith(LOCAL_PATH_PREFIXES)


def _inside(path: str, root: Path) -> bool:
    real, top = Path(os.path.realpath(os.path.expanduser(path))), Path(os.path.realpath(root))
    return real.is_relative_to(top) and real != top


def model_problem(model: str, data_dir: Path) -> str | None:
    """Why a user may not name `model` (a local path outside `models/`), or None."""
    if is_local_model(model) and not _inside(model, data_dir / MODELS):
        return (
            f"{model!r} is not in the server's model folder: a local model must be a "
            f"directory in {MODELS}/ of Troupe's data directory, where the operator puts it"
        )
    return None


def dataset_problem(dataset: str, data_dir: Path) -> str | None:
    """Why a user may not name `dataset` (a .jsonl outside `datasets/`), or None."""
    if dataset.endswith(".jsonl") and not _inside(dataset, data_dir / DATASETS):
        return (
            f"{dataset!r} is not in the server's dataset folder: a .jsonl dataset must "
            f"be a file in {DATASETS}/ of Troupe's data directory, where the operator puts it"
        )
    return None


PROBLEMS = {"model": model_problem, "dataset": dataset_problem}  # by config field


def outside_user_folders(config: Any, data_dir: Path) -> dict[str, str]:
    """{field: why} for each of `config`'s `model` and `dataset` a user may not name: empty
    when both are fine (a named model or dataset always is)."""
    found = {
        field: problem_of(getattr(config, field), data_dir)
        for field, problem_of in PROBLEMS.items()
    }
    return {field: why for field, why in found.items() if why}
