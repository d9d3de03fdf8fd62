"""Where a run's checkpoints are and where it resumes from: paths only, no torch.

A run directory keeps its checkpoints in `checkpoints/`: `step-<step>/` (the latest few, for
resuming) and `best-<step>/` (the policies of its best evaluation), each holding `state.pt`.
This module is the one place that reads a step from a directory name, so the trainer, the
CLI, the worker and the web pages (which must not import torch) agree on what a run holds and
where it continues:

- `list_checkpoints(out_dir)`: every complete checkpoint, sorted by step.
- `resume_point(out_dir, init_from)`: the run's own latest step checkpoint; else, for a run
  branched from another run's checkpoint, that checkpoint; else None (start at step 0).

The one resolver of checkpoint names. Everything that takes a run's weights (`trainer eval
--checkpoint`, `--role-checkpoint`, a branch, `init_from`, a mix-and-match source, an
attribution, the web pages) names a checkpoint the same way and finds it here:

- `find_checkpoint(out_dir, name)`: `best` (as best.json names it), `latest` (the newest step
  checkpoint), `step-N` (`step-120` or `step-000120`: the step checkpoint of step N, else the
  best one of that step), `best-N`. Only a folder directly in the run's `checkpoints/` (real
  paths: no link leads out of it) is ever returned.
- `checkpoint_at(path)`: a checkpoint folder named by its path, which only the operator's own
  command line may do (docs/security.md).
- `check_fits(ref, config, same_sharing)`: the config of the run a checkpoint belongs to
  (`config.json` beside its `checkpoints/`), refused when it differs from `config` in one of
  `SHAPE_FIELDS` (the policies would not fit), or in `sharing` when every policy is loaded by
  name (a branch).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

STATE_FILE = "state.pt"
BEST_FILE = "best.json"  # in checkpoints/: {"step", "accuracy", "path"} of the best one
_NAME = re.compile(r"^(step|best)-(\d{1,12})$")
NAMES = "best, latest, step-N or best-N"  # what find_checkpoint takes, for messages
# What a checkpoint's run must share with the run that takes its weights: the policies' shapes
# and the workflow whose roles they play.
SHAPE_FIELDS = ("workflow", "model", "finetune", "lora_r", "lora_alpha", "lora_targets")


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


def kept_names(out_dir: str | Path) -> str:
    """The names of the checkpoints the run keeps, for a message."""
    names = [ref.path.name for ref in list_checkpoints(out_dir)]
    return ", ".join(names) if names else "none"


def _inside(root: Path, name: str) -> Path | None:
    """`root/name` when `name` is a checkpoint's name and the folder's real path is directly
    in `root`'s real path (no link leads elsewhere); else None."""
    if not isinstance(name, str) or _NAME.match(name) is None:
        return None
    path = root / name
    if path.is_symlink() or path.resolve().parent != root.resolve():
        return None
    return path if (path / STATE_FILE).is_file() else None


def is_checkpoint_name(name: str) -> bool:
    """Whether `name` is one of the names `find_checkpoint` takes (not a path)."""
    return name in ("best", "latest") or _NAME.match(name) is not None


def find_checkpoint(out_dir: str | Path, name: str) -> CheckpointRef:
    """The checkpoint of the run in `out_dir` that `name` names (best, latest, step-N, best-N).
    ValueError for a name that is none of these; FileNotFoundError saying what the run keeps
    when it keeps no such checkpoint (its message follows the run's name: "… holds no best
    checkpoint yet")."""
    if not isinstance(name, str) or not is_checkpoint_name(name):
        raise ValueError(f"{name!r} is not a checkpoint name; use {NAMES}")
    root = checkpoint_root(out_dir)
    if name == "latest":
        steps = [ref for ref in list_checkpoints(out_dir) if ref.kind == "step"]
        path = _inside(root, steps[-1].path.name) if steps else None
        if path is None:
            raise FileNotFoundError("holds no step checkpoint yet")
        return parse_checkpoint(path)
    if name == "best":
        best = read_best(out_dir) if root.is_dir() else None
        path = _inside(root, best.get("path")) if isinstance(best, dict) else None
        if path is None:
            raise FileNotFoundError("holds no best checkpoint yet (saved at evaluations)")
        return parse_checkpoint(path)
    match = _NAME.match(name)
    kind, step = match.group(1), int(match.group(2))
    kinds = ("step", "best") if kind == "step" else ("best",)
    for which in kinds:  # step-N: the step checkpoint of step N, else the best one
        path = _inside(root, checkpoint_dir_name(which, step))
        if path is not None:
            return parse_checkpoint(path)
    what = "checkpoint" if kind == "step" else "best checkpoint"
    raise FileNotFoundError(f"keeps no {what} of step {step} (it keeps: {kept_names(out_dir)})")


def checkpoint_at(path: str | Path, what: str = "checkpoint") -> CheckpointRef:
    """The checkpoint folder at `path` (the operator's command line only: docs/security.md);
    FileNotFoundError naming it when it is not one."""
    ref = parse_checkpoint(path)
    if ref is None:
        raise FileNotFoundError(
            f"{what}: {str(path)!r} is not a checkpoint directory "
            "(its name should be step-NNNNNN or best-NNNNNN)"
        )
    if not (Path(path) / STATE_FILE).is_file():
        raise FileNotFoundError(f"{what}: {str(path)!r} holds no {STATE_FILE}")
    return ref


def branch_point(init_from: str | Path) -> CheckpointRef:
    """The checkpoint `init_from` names; FileNotFoundError naming it when it is not one."""
    return checkpoint_at(init_from, "init_from")


def check_fits(ref: CheckpointRef, config, same_sharing: bool = False):
    """The config of the run `ref` belongs to, after checking that its policies fit `config`
    (`SHAPE_FIELDS`; `sharing` too when `same_sharing`). FileNotFoundError when that config
    cannot be read; ConfigError naming the field that differs."""
    from trainer.config import ConfigError, config_from_dict

    config_file = ref.path.parent.parent / "config.json"
    try:
        parent = config_from_dict(json.loads(config_file.read_text()))
    except OSError as exc:  # its message would name the folder: say what, not where
        raise FileNotFoundError(
            f"the run {ref.path.name} belongs to has no readable config.json ({type(exc).__name__})"
        ) from None
    except ValueError as exc:
        raise FileNotFoundError(
            f"the config of the run {ref.path.name} belongs to is not valid: {exc}"
        ) from None
    fields = SHAPE_FIELDS + (("sharing",) if same_sharing else ())
    for name in fields:
        if getattr(parent, name) != getattr(config, name):
            raise ConfigError(
                {
                    name: f"{getattr(config, name)!r} differs from {getattr(parent, name)!r} of "
                    f"the run checkpoint {ref.path.name} belongs to: a branch or a mix-and-match "
                    "source keeps that run's policy layout"
                }
            )
    return parent


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
