"""Runs with checkpoints on disk, for the branching tests: the layout the trainer writes
(`trainer/checkpoint.py`), with placeholder bytes where the policies' state would be (the web
process never reads it; it only links or copies it)."""

from __future__ import annotations

import json
from pathlib import Path

from webapp.experiments.models import Run
from webapp.metrics import write_points


def give_checkpoints(
    run: Run, out: Path, *, best: int | None = 2, steps: tuple[int, ...] = (4, 6)
) -> Run:
    """Write `out/checkpoints/step-<s>/` for each of `steps` and `best-<best>/` with best.json,
    evaluations at those steps, and point the run at `out` as a worker would."""
    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(run.config))
    for step in steps:
        folder = root / f"step-{step:06d}"
        folder.mkdir()
        (folder / "state.pt").write_bytes(f"state of step {step}".encode())
        (folder / "meta.json").write_text(json.dumps({"step": step, "best": None, "evals": []}))
    if best is not None:
        folder = root / f"best-{best:06d}"
        folder.mkdir()
        (folder / "state.pt").write_bytes(f"best state of step {best}".encode())
        best_json = {"step": best, "accuracy": 0.5, "path": folder.name}
        (root / "best.json").write_text(json.dumps(best_json))
    evals = sorted({0, *steps, *([best] if best is not None else [])})
    write_points(run.id, [("eval/accuracy", s, 0.5 if s == best else 0.25) for s in evals])
    Run.objects.filter(id=run.id).update(
        checkpoint_dir=str(out), status=Run.SUCCEEDED, step=run.total_steps
    )
    run.refresh_from_db()
    return run
