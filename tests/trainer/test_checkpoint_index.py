"""trainer.checkpoint_index: a run's checkpoints and its resume point, from paths alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer.checkpoint_index import CheckpointRef, list_checkpoints, resume_point


def checkpoint(out: Path, name: str, complete: bool = True) -> Path:
    path = out / "checkpoints" / name
    path.mkdir(parents=True)
    if complete:
        (path / "state.pt").write_bytes(b"state")
    return path


def test_it_lists_complete_checkpoints_by_step(tmp_path):
    checkpoint(tmp_path, "step-000010")
    checkpoint(tmp_path, "best-000004")
    checkpoint(tmp_path, "step-000004")
    checkpoint(tmp_path, "step-000012", complete=False)  # a save that never finished
    checkpoint(tmp_path, ".tmp-step-000014-99")
    (tmp_path / "checkpoints" / "best.json").write_text("{}")
    root = tmp_path / "checkpoints"
    assert list_checkpoints(tmp_path) == [
        CheckpointRef(4, "best", root / "best-000004"),
        CheckpointRef(4, "step", root / "step-000004"),
        CheckpointRef(10, "step", root / "step-000010"),
    ]
    assert list_checkpoints(tmp_path / "nothing-here") == []


def test_a_run_resumes_from_its_own_latest_step_before_its_branch_point(tmp_path):
    parent = checkpoint(tmp_path / "parent", "best-000006")
    child = tmp_path / "child"
    assert resume_point(child) is None
    assert resume_point(child, str(parent)) == CheckpointRef(6, "best", parent)
    checkpoint(child, "best-000008")  # a best alone is not a place to resume from
    assert resume_point(child, str(parent)).step == 6
    own = checkpoint(child, "step-000007")
    assert resume_point(child, str(parent)) == CheckpointRef(7, "step", own)


def test_a_bad_branch_point_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="init_from.*step-000002.*no state.pt"):
        resume_point(tmp_path, str(tmp_path / "gone" / "checkpoints" / "step-000002"))
    with pytest.raises(FileNotFoundError, match="init_from.*not a checkpoint directory"):
        resume_point(tmp_path, str(tmp_path))


def test_it_imports_without_torch():
    code = "import sys, trainer.checkpoint_index; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
