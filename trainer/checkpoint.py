"""Checkpoints of a run directory: save atomically, find the latest, restore.

A checkpoint holds everything that determines the rest of the run: every policy's weights
(adapters or full copies), optimizer and scheduler states, the coherence regulariser's EMA,
torch's RNG state and the step. Sampling noise and problem draws are counter-based functions
of (seed, step, …), so nothing else is needed for a resumed run to continue exactly as an
uninterrupted one would. Only the newest `keep` checkpoints are kept.

The best checkpoint. Beside the latest, a run keeps the policies of its best evaluation by
`eval/accuracy` (the first step attaining the best so far, as §6 `peak_step`): after each
evaluation that beats it, `keep_best` saves them in `checkpoints/best-<step>/` (the same
state as a step checkpoint, plus the accuracy) and names it in `checkpoints/best.json`
(`{"step", "accuracy", "path"}`). Each step checkpoint records in its `meta.json` the best
and the evaluations known when it was taken, so a resumed run knows its best: `restore_meta`
drops a best saved after the checkpoint it resumes from (that future is trained again) and
points best.json back at the one the checkpoint knew. Best directories no checkpoint or
best.json names are removed, so there are at most two. `resolve_checkpoint(out, "best")`
finds it for `python -m trainer eval --checkpoint best --out DIR`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

_STEP_DIR = re.compile(r"^step-(\d+)$")
_BEST_DIR = re.compile(r"^best-(\d+)$")
BEST_FILE = "best.json"
META_FILE = "meta.json"


def checkpoint_root(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    root = checkpoint_root(out_dir)
    if not root.is_dir():
        return None
    steps = sorted(
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP_DIR.match(p.name)) and (p / "state.pt").exists()
    )
    return steps[-1][1] if steps else None


def save_checkpoint(
    out_dir: str | Path,
    step: int,
    policies,
    config_hash: str,
    keep: int = 2,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Save the step's state; `meta` (the best so far, the evaluations) goes in meta.json."""
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"step-{step:06d}"
    staging = root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    state = {
        "step": step,
        "config_hash": config_hash,
        "policies": policies.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }
    torch.save(state, staging / "state.pt")
    (staging / META_FILE).write_text(json.dumps({"step": step, **(meta or {})}))
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)  # atomic: a crash leaves either the old or the new checkpoint
    old = sorted(p for p in root.iterdir() if _STEP_DIR.match(p.name))
    for stale in old[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
    _prune_best(root)
    return target


def load_checkpoint(path: str | Path, policies, config_hash: str) -> int:
    """Restore policies in place; return the step the checkpoint was taken after."""
    state = torch.load(Path(path) / "state.pt", map_location="cpu", weights_only=False)
    if state["config_hash"] != config_hash:
        raise ValueError(
            f"checkpoint {path} belongs to a run with a different config "
            f"({state['config_hash']} != {config_hash}); use a fresh output directory"
        )
    policies.load_state_dict(state["policies"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"])


def _write_json(path: Path, value: Any) -> None:
    staging = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    staging.write_text(json.dumps(value))
    staging.replace(path)  # atomic


def read_best(out_dir: str | Path) -> dict[str, Any] | None:
    """The run's best checkpoint as best.json names it: {"step", "accuracy", "path"}."""
    path = checkpoint_root(out_dir) / BEST_FILE
    return json.loads(path.read_text()) if path.exists() else None


def keep_best(
    out_dir: str | Path,
    best: dict[str, Any] | None,
    step: int,
    accuracy: float,
    policies,
    config_hash: str,
) -> dict[str, Any]:
    """After an evaluation: save the policies as the best checkpoint when `accuracy` beats
    `best` (strictly: the first step attaining the best is kept); returns the best now."""
    if best is not None and not accuracy > best["accuracy"]:
        return best
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = f"best-{step:06d}"
    staging = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    state = {
        "step": step,
        "accuracy": float(accuracy),
        "config_hash": config_hash,
        "policies": policies.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }
    torch.save(state, staging / "state.pt")
    if (root / name).exists():
        shutil.rmtree(root / name)
    staging.rename(root / name)
    best = {"step": step, "accuracy": float(accuracy), "path": name}
    _write_json(root / BEST_FILE, best)
    _prune_best(root)
    return best


def restore_meta(out_dir: str | Path, checkpoint: Path | None) -> dict[str, Any]:
    """What a run resuming from `checkpoint` (None: starting afresh) knew when it was taken:
    {"best", "evals"}; best directories from after it are removed and best.json rewritten."""
    root = checkpoint_root(out_dir)
    meta: dict[str, Any] = {}
    if checkpoint is not None and (checkpoint / META_FILE).exists():
        meta = json.loads((checkpoint / META_FILE).read_text())
    best = meta.get("best")
    if root.is_dir():
        if best is None:
            (root / BEST_FILE).unlink(missing_ok=True)
        else:
            _write_json(root / BEST_FILE, best)
        _prune_best(root)
    return {"best": best, "evals": [tuple(pair) for pair in meta.get("evals", [])]}


def _prune_best(root: Path) -> None:
    """Remove best directories that neither best.json nor the newest checkpoint names."""
    wanted = set()
    if (root / BEST_FILE).exists():
        wanted.add(json.loads((root / BEST_FILE).read_text())["path"])
    newest = latest_checkpoint(root.parent)
    if newest is not None and (newest / META_FILE).exists():
        if best := json.loads((newest / META_FILE).read_text()).get("best"):
            wanted.add(best["path"])
    for path in root.iterdir():
        if _BEST_DIR.match(path.name) and path.name not in wanted:
            shutil.rmtree(path, ignore_errors=True)


def resolve_checkpoint(out_dir: str | Path | None, which: str) -> Path:
    """A checkpoint directory from `--checkpoint`: "best" or "latest" of the run in `out_dir`,
    or a path. Raises FileNotFoundError saying what is missing."""
    if which not in ("best", "latest"):
        path = Path(which)
        if not (path / "state.pt").exists():
            raise FileNotFoundError(f"{path} is not a checkpoint directory (no state.pt)")
        return path
    if out_dir is None:
        raise ValueError(f"--checkpoint {which} needs --out DIR, the run's directory")
    if which == "latest":
        found = latest_checkpoint(out_dir)
        if found is None:
            raise FileNotFoundError(f"{out_dir} holds no checkpoint yet")
        return found
    best = read_best(out_dir)
    if best is None or not (checkpoint_root(out_dir) / best["path"] / "state.pt").exists():
        raise FileNotFoundError(f"{out_dir} holds no best checkpoint yet (saved at evaluations)")
    return checkpoint_root(out_dir) / best["path"]
