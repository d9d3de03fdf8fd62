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


# --- the one resolver of checkpoint names --------------------------------------------------


@pytest.fixture
def kept(tmp_path) -> Path:
    """A run keeping step-4, step-10 and best-4, best.json naming best-4."""
    for name in ("step-000004", "step-000010", "best-000004"):
        checkpoint(tmp_path, name)
    (tmp_path / "checkpoints" / "best.json").write_text(
        '{"step": 4, "accuracy": 0.5, "path": "best-000004"}'
    )
    return tmp_path


@pytest.mark.parametrize(
    "name, found",
    [
        ("best", "best-000004"),
        ("latest", "step-000010"),
        ("step-10", "step-000010"),
        ("step-000010", "step-000010"),
        ("step-4", "step-000004"),  # the step checkpoint before the best one of its step
        ("best-4", "best-000004"),
    ],
)
def test_every_loader_finds_a_checkpoint_by_the_same_names(kept, name, found):
    from trainer.checkpoint import resolve_checkpoint
    from trainer.checkpoint_index import find_checkpoint

    assert find_checkpoint(kept, name).path == kept / "checkpoints" / found
    assert resolve_checkpoint(kept, name) == kept / "checkpoints" / found  # trainer eval


def test_trainer_eval_takes_a_step_name_as_role_checkpoint_does(kept):
    from trainer.checkpoint import resolve_checkpoint
    from trainer.config import make_config
    from trainer.role_sources import resolve_source

    config = make_config("cpu-demo")
    assert resolve_checkpoint(kept, "step-10") == resolve_source("step-10", config, kept).path


@pytest.mark.parametrize(
    "name", ["step-7", "best-10", "../checkpoints/step-000004", "step-000004/..", "x", "", "a\0b"]
)
def test_a_name_the_run_does_not_keep_is_refused_saying_what_it_keeps(kept, name):
    from trainer.checkpoint_index import find_checkpoint

    with pytest.raises((FileNotFoundError, ValueError)) as caught:
        find_checkpoint(kept, name)
    assert "it keeps: best-000004, step-000004, step-000010" in str(caught.value) or (
        "is not a checkpoint name" in str(caught.value)
    )


def test_a_link_or_a_hostile_best_json_leads_nowhere(kept, tmp_path_factory):
    from trainer.checkpoint_index import find_checkpoint

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    checkpoint(elsewhere, "step-000099")
    (kept / "checkpoints" / "step-000099").symlink_to(elsewhere / "checkpoints" / "step-000099")
    with pytest.raises(FileNotFoundError):
        find_checkpoint(kept, "step-99")
    for path in ("../../elsewhere/checkpoints/step-000099", "/etc", "step-000099"):
        (kept / "checkpoints" / "best.json").write_text(f'{{"step": 4, "path": "{path}"}}')
        with pytest.raises(FileNotFoundError):
            find_checkpoint(kept, "best")
