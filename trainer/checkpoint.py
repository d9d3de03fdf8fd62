"""Checkpoints of a run directory: save atomically, find the latest, restore.

A checkpoint holds everything that determines the rest of the run: every policy's weights
(adapters or full copies), optimizer and scheduler states, the coherence regulariser's EMA,
torch's RNG state and the step. Sampling noise and problem draws are counter-based functions
of (seed, step, …), so nothing else is needed for a resumed run to continue exactly as an
uninterrupted one would. Only the newest `keep` checkpoints are kept.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import torch

_STEP_DIR = re.compile(r"^step-(\d+)$")


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
    out_dir: str | Path, step: int, policies, config_hash: str, keep: int = 2
) -> Path:
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
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)  # atomic: a crash leaves either the old or the new checkpoint
    old = sorted(p for p in root.iterdir() if _STEP_DIR.match(p.name))
    for stale in old[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
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
