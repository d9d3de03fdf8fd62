"""Checkpoints of a run directory: save atomically, restore, branch from another run's.

Which checkpoints a run holds and where it resumes from is `trainer/checkpoint_index.py`
(paths only, torch-free); this module writes and reads their contents.

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
finds it for `python -m trainer eval --checkpoint best --out DIR` (names: the one resolver,
`checkpoint_index.find_checkpoint`).

Reading never runs code: every state.pt is read by `trainer/safe_load.py`.

Sharded policies (full fine-tuning over several ranks, trainer/sharding.py). Every rank writes
its shards into `shards/` of a staging directory all ranks name alike (`shard_staging`),
then rank 0 adds the state file and meta.json and renames the staging directory into place
(`staging=` of `save_checkpoint`/`keep_best`): a rank killed mid-write leaves only a staging
directory, never a half checkpoint. Loading passes the checkpoint directory to the policies,
which read the shards on any number of ranks, or whole in one process.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoint_index import (  # noqa: F401 - read_best re-exported
    BEST_FILE,
    STATE_FILE,
    CheckpointRef,
    check_fits,
    checkpoint_at,
    checkpoint_dir_name,
    checkpoint_root,
    find_checkpoint,
    is_checkpoint_name,
    latest_step_checkpoint,
    parse_checkpoint,
    read_best,
)
from trainer.safe_load import load_state

META_FILE = "meta.json"


def _kind_dirs(root: Path, kind: str) -> list[Path]:
    """Directories under `root` named like `kind` checkpoints (complete or not), by step."""
    refs = [ref for p in root.iterdir() if (ref := parse_checkpoint(p)) and ref.kind == kind]
    return [ref.path for ref in sorted(refs)]


def save_checkpoint(
    out_dir: str | Path,
    step: int,
    policies,
    config_hash: str,
    keep: int = 2,
    meta: dict[str, Any] | None = None,
    staging: Path | None = None,
) -> Path:
    """Save the step's state; `meta` (the best so far, the evaluations) goes in meta.json.
    `staging`: the directory the ranks of a sharded run wrote their shards into."""
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / checkpoint_dir_name("step", step)
    if staging is None:
        staging = root / f".tmp-step-{step:06d}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    state = {
        "step": step,
        "config_hash": config_hash,
        "policies": policies.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }
    torch.save(state, staging / STATE_FILE)
    (staging / META_FILE).write_text(json.dumps({"step": step, **(meta or {})}))
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)  # atomic: a crash leaves either the old or the new checkpoint
    for stale in _kind_dirs(root, "step")[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
    _prune_best(root)
    return target


def load_checkpoint(path: str | Path, policies, config_hash: str) -> int:
    """Restore policies in place; return the step the checkpoint was taken after."""
    state = load_state(path)
    if state["config_hash"] != config_hash:
        raise ValueError(
            f"checkpoint {path} belongs to a run with a different config "
            f"({state['config_hash']} != {config_hash}); use a fresh output directory"
        )
    policies.load_state_dict(state["policies"], Path(path))
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"])


def shard_staging(out_dir: str | Path, kind: str, step: int) -> Path:
    """Where the ranks of a sharded run write a checkpoint's shards before rank 0 renames it
    (one name for every rank: no pid in it)."""
    return checkpoint_root(out_dir) / f".tmp-{checkpoint_dir_name(kind, step)}-ranks"


def check_branch(ref: CheckpointRef, config) -> None:
    """Refuse to branch `config` from `ref` when the parent's config differs in a field that
    shapes the policies, or in `sharing` (a branch loads every policy by name): ConfigError
    naming the field, FileNotFoundError when the parent config is missing."""
    try:
        check_fits(ref, config, same_sharing=True)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"init_from: {exc}") from None


def load_branch(ref: CheckpointRef, policies, config) -> int:
    """Start a branched run from another run's checkpoint: every policy's weights, optimizer,
    scheduler and coherence EMA, and torch's RNG, whatever the parent's config hash. The
    optimizers' learning rates are then re-derived from this run's `lr` and schedule, so a
    branch that changes them uses its own from its first step (a control continuation gets
    the very values the parent had). Returns the step the checkpoint was taken after."""
    check_branch(ref, config)
    try:
        state = load_state(ref.path)
    except OSError as exc:
        raise FileNotFoundError(f"init_from: cannot read {ref.path / STATE_FILE}: {exc}") from exc
    policies.load_state_dict(state["policies"], ref.path)
    for name in policies.names:
        scheduler = policies.scheduler(name)
        scheduler.base_lrs = [config.lr for _ in scheduler.base_lrs]
        for group, factor in zip(scheduler.optimizer.param_groups, scheduler.lr_lambdas):
            group["initial_lr"] = config.lr
            group["lr"] = config.lr * factor(scheduler.last_epoch)
        # what get_last_lr() reports (logged as policy/<name>/lr) until the next step
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"])


def _write_json(path: Path, value: Any) -> None:
    staging = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    staging.write_text(json.dumps(value))
    staging.replace(path)  # atomic


def keep_best(
    out_dir: str | Path,
    best: dict[str, Any] | None,
    step: int,
    accuracy: float,
    policies,
    config_hash: str,
    staging: Path | None = None,
) -> dict[str, Any]:
    """After an evaluation: save the policies as the best checkpoint when `accuracy` beats
    `best` (strictly: the first step attaining the best is kept); returns the best now.
    `staging`: as for `save_checkpoint`."""
    if best is not None and not accuracy > best["accuracy"]:
        return best
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = checkpoint_dir_name("best", step)
    if staging is None:
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
    torch.save(state, staging / STATE_FILE)
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
    newest = latest_step_checkpoint(root.parent)
    if newest is not None and (newest.path / META_FILE).exists():
        if best := json.loads((newest.path / META_FILE).read_text()).get("best"):
            wanted.add(best["path"])
    for path in _kind_dirs(root, "best"):
        if path.name not in wanted:
            shutil.rmtree(path, ignore_errors=True)


def resolve_checkpoint(out_dir: str | Path | None, which: str) -> Path:
    """A checkpoint directory from `--checkpoint` (the operator's command line): a name
    (best, latest, step-N, best-N) of the run in `out_dir`, or a path. Raises
    FileNotFoundError saying what is missing."""
    if not is_checkpoint_name(which):
        return checkpoint_at(which, "--checkpoint").path
    if out_dir is None:
        raise ValueError(f"--checkpoint {which} needs --out DIR, the run's directory")
    try:
        return find_checkpoint(out_dir, which).path
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{out_dir} {exc}") from None
