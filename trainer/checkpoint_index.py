"""Where a run's checkpoints are and where it resumes from: paths only, no torch.

A run directory keeps its checkpoints in `checkpoints/`: `step-<step>/` (the latest few, for
resuming) and `best-<step>/` (the policies of its best evaluation), each holding `state.pt`.
This module is the one place that reads a step from a directory name, so the trainer, the
CLI, the worker and the web pages (which must not import torch) agree on what a run holds and
where it continues:

- `list_checkpoints(out_dir)`: every complete checkpoint, sorted by step.
- `resume_point(out_dir, init_from)`: the run's own latest step checkpoint; else, for a run
  branched from another run's checkpoint, that checkpoint; else None (start at step 0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

STATE_FILE = "state.pt"
BEST_FILE = "best.json"  # in checkpoints/: {"step", "accuracy", "path"} of the best one
_NAME = re.compile(r"^(step|best)-(\d+)$")


@dataclass(frozen=True, order=True)
class CheckpointRef:
    step: int  # the training step the checkpoint was taken after (0: the base model)
    kind: Literal["step", "best"]
    path: Path


def checkpoint_root(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def checkpoint_dir_name(kind: str, step: int) -> str:
    return f"{kind}-{step:06d}"


def parse_checkpoint(path: str | Path) -> CheckpointRef | None:
    """The checkpoint a directory named `step-000040` or `best-000040` is; None otherwise
    (the directory need not exist)."""
    path = Path(path)
    match = _NAME.match(path.name)
    if match is None:
        return None
    return CheckpointRef(step=int(match.group(2)), kind=match.group(1), path=path)


def list_checkpoints(out_dir: str | Path) -> list[CheckpointRef]:
    """Every complete checkpoint (its state.pt written) of the run in `out_dir`, by step
    (a best and a step checkpoint of the same step: best first)."""
    root = checkpoint_root(out_dir)
    if not root.is_dir():
        return []
    refs = [
        ref
        for path in root.iterdir()
        if (ref := parse_checkpoint(path)) is not None and (path / STATE_FILE).exists()
    ]
    return sorted(refs)


def read_best(out_dir: str | Path) -> dict | None:
    """The run's best checkpoint as best.json names it: {"step", "accuracy", "path"}."""
    path = checkpoint_root(out_dir) / BEST_FILE
    return json.loads(path.read_text()) if path.exists() else None


def latest_step_checkpoint(out_dir: str | Path) -> CheckpointRef | None:
    """The run's newest `step-*` checkpoint, or None."""
    steps = [ref for ref in list_checkpoints(out_dir) if ref.kind == "step"]
    return steps[-1] if steps else None


def branch_point(init_from: str | Path) -> CheckpointRef:
    """The checkpoint `init_from` names; FileNotFoundError naming it when it is not one."""
    path = Path(init_from)
    ref = parse_checkpoint(path)
    if ref is None:
        raise FileNotFoundError(
            f"init_from: {str(init_from)!r} is not a checkpoint directory "
            "(its name should be step-NNNNNN or best-NNNNNN)"
        )
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"init_from: {str(init_from)!r} holds no {STATE_FILE}")
    return ref


def resume_point(out_dir: str | Path, init_from: str = "") -> CheckpointRef | None:
    """Where the run in `out_dir` continues from: its own latest step checkpoint first; else
    the checkpoint `init_from` names (a branched run's start); else None (step 0)."""
    own = latest_step_checkpoint(out_dir)
    if own is not None:
        return own
    if init_from:
        return branch_point(init_from)
    return None


def first_logged_step(out_dir: str | Path, init_from: str = "") -> int:
    """The first step the run in `out_dir` logs when it (re)starts: the step after its own
    checkpoint, the branch point (evaluated again) or 0 (the base model)."""
    start = resume_point(out_dir, init_from)
    if start is None:
        return 0
    return start.step + 1 if is_own(start, out_dir) else start.step


def is_own(ref: CheckpointRef, out_dir: str | Path) -> bool:
    """Whether `ref` is a checkpoint of the run in `out_dir` (not the one it branched from)."""
    return ref.path.resolve().parent == checkpoint_root(out_dir).resolve()
