"""No checkpoint loader runs code a file asks for: a `state.pt` (or a sharded checkpoint's
metadata) whose unpickling would write a marker file is refused by every loader — resume,
branch, mix-and-match — and the marker never appears; Troupe's own checkpoints still load."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from tests.trainer import quick
from trainer.checkpoint import load_branch, load_checkpoint
from trainer.checkpoint_index import STATE_FILE, parse_checkpoint
from trainer.mixed_eval import _policies_state
from trainer.safe_load import SafeReader, UnsafeCheckpoint, load_state


class Payload:
    """Unpickling this writes `marker`: what an attacker's state.pt would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def hostile(tmp_path):
    """A run folder whose checkpoint step-000001 holds the payload; (checkpoint, marker)."""
    marker = tmp_path / "marker"
    folder = tmp_path / "run" / "checkpoints" / "step-000001"
    folder.mkdir(parents=True)
    torch.save({"step": 1, "config_hash": "x", "policies": Payload(marker)}, folder / STATE_FILE)
    (tmp_path / "run" / "config.json").write_text(json.dumps(quick.small().to_dict()))
    return folder, marker


def test_resuming_refuses_a_pickle_that_runs_code(hostile):
    folder, marker = hostile
    with pytest.raises(ValueError, match="not tensors or plain data"):
        load_checkpoint(folder, None, "x")
    assert not marker.exists()


def test_branching_refuses_a_pickle_that_runs_code(hostile):
    folder, marker = hostile
    with pytest.raises(ValueError, match="not tensors or plain data"):
        load_branch(parse_checkpoint(folder), None, quick.small())
    assert not marker.exists()


def test_a_mix_and_match_source_refuses_a_pickle_that_runs_code(hostile):
    folder, marker = hostile
    with pytest.raises(ValueError, match="not tensors or plain data"):
        _policies_state(folder)
    assert not marker.exists()


def test_a_plain_state_loads(tmp_path):
    state = {"step": 3, "policies": {"weights": {"w": torch.ones(2)}}, "rng": torch.get_rng_state()}
    torch.save(state, tmp_path / STATE_FILE)
    loaded = load_state(tmp_path)
    assert loaded["step"] == 3 and torch.equal(loaded["policies"]["weights"]["w"], torch.ones(2))


def test_a_sharded_checkpoints_metadata_is_read_with_an_allowlist(tmp_path):
    import torch.distributed.checkpoint as dcp

    dcp.save({"model": {"w": torch.arange(4.0)}}, checkpoint_id=str(tmp_path / "good"))
    target = {"model": {"w": torch.zeros(4)}}
    dcp.load(target, storage_reader=SafeReader(tmp_path / "good"))
    assert torch.equal(target["model"]["w"], torch.arange(4.0))

    marker = tmp_path / "marker"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UnsafeCheckpoint, match="names io.open"):
        SafeReader(tmp_path / "bad").read_metadata()
    assert not marker.exists()
