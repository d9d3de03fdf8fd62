"""The vLLM engine's bad inputs: each a clear error naming the fix, never a hang.

No vLLM needed: a missing venv, an engine that dies at start and one that never answers are
played by stand-in interpreters (TROUPE_VLLM_PYTHON), and the head-size check reads only the
model's config.json.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from trainer.config import ConfigError, make_config
from trainer.engines.vllm_engine import EngineError, VllmEngine, check_servable


def _model(tmp_path: Path, head_dim: int = 32) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    config = {"hidden_size": 192, "num_attention_heads": 6, "head_dim": head_dim}
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 512}))
    return folder


def _start(tmp_path, model):
    config = make_config("cpu-demo", model=str(model), rollout_engine="vllm")
    policies = SimpleNamespace(device=torch.device("cpu"), names=["shared"])
    return VllmEngine.start(config, policies, str(model), log_dir=tmp_path)


def _stand_in(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/bash\necho $$ > {tmp_path}/pid\n{body}\n")
    script.chmod(0o755)
    return script


def _gone(pid: int) -> bool:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_missing_vllm_venv_names_the_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_VLLM_PYTHON", str(tmp_path / "nowhere" / "python"))
    with pytest.raises(EngineError, match="make vllm-venv"):
        _start(tmp_path, _model(tmp_path))


def test_an_engine_that_dies_at_start_fails_with_its_last_log_lines(tmp_path, monkeypatch):
    script = _stand_in(tmp_path, 'echo "RuntimeError: no usable CPU backend" >&2\nexit 3')
    monkeypatch.setenv("TROUPE_VLLM_PYTHON", str(script))
    with pytest.raises(EngineError) as caught:
        _start(tmp_path, _model(tmp_path))
    message = str(caught.value)
    assert "exited (code 3) during start-up" in message
    assert "RuntimeError: no usable CPU backend" in message


def test_an_engine_that_never_answers_times_out_and_is_ended(tmp_path, monkeypatch):
    script = _stand_in(tmp_path, 'echo "loading…" >&2\nexec sleep 600')
    monkeypatch.setenv("TROUPE_VLLM_PYTHON", str(script))
    monkeypatch.setenv("TROUPE_VLLM_START_TIMEOUT", "2")
    with pytest.raises(EngineError, match=r"did not answer start-up within 2 s(.|\n)*loading"):
        _start(tmp_path, _model(tmp_path))
    assert _gone(int((tmp_path / "pid").read_text()))


def test_a_head_size_the_cpu_build_cannot_serve_names_tiny_m(tmp_path):
    with pytest.raises(EngineError, match="head size is 24.*use model tiny-m"):
        check_servable(str(_model(tmp_path, head_dim=24)), "cpu")
    check_servable(str(tmp_path / "model"), "cuda")  # a GPU's attention takes it


def test_the_engine_field_is_validated_and_hashed_only_when_set():
    with pytest.raises(ConfigError, match="rollout_engine"):
        make_config("cpu-demo", rollout_engine="sglang")
    with pytest.raises(ConfigError, match="world_size 1"):
        make_config("cpu-demo", rollout_engine="vllm", world_size=2)
    with pytest.raises(ConfigError, match="is_cap"):
        make_config("cpu-demo", is_cap=0.5)
    base = make_config("cpu-demo")
    assert make_config("cpu-demo", rollout_engine="hf").hash() == base.hash()
    assert make_config("cpu-demo", rollout_engine="vllm").hash() != base.hash()
    assert make_config("cpu-demo", is_cap=2.0).hash() != base.hash()


def test_a_python_that_cannot_run_names_the_make_target(tmp_path, monkeypatch):
    broken = tmp_path / "python"
    broken.write_text("not a program")
    broken.chmod(0o644)  # not executable
    monkeypatch.setenv("TROUPE_VLLM_PYTHON", str(broken))
    with pytest.raises(EngineError, match="could not run the vLLM venv's Python.*make vllm-venv"):
        _start(tmp_path, _model(tmp_path))


def test_a_dead_trainers_weight_folder_is_swept_at_the_next_start(tmp_path):
    from trainer.engines.vllm_engine import _sweep_orphans

    dead = tmp_path / "troupe-vllm-999999999-abc"  # no such pid
    alive = tmp_path / f"troupe-vllm-{os.getpid()}-def"
    for folder in (dead, alive):
        (folder / "v1").mkdir(parents=True)
    _sweep_orphans(tmp_path)
    assert not dead.exists() and alive.exists()
