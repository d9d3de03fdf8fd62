"""What the vLLM engine's tests share: the venv check and a tiny-m-shaped random model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from trainer.engines.vllm_engine import EngineError, vllm_python


def require_vllm() -> Path:
    """The vLLM venv's Python; skip without it, or fail under TROUPE_REQUIRE_SERVICES=1."""
    try:
        return vllm_python()
    except EngineError as exc:
        if os.environ.get("TROUPE_REQUIRE_SERVICES", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"TROUPE_REQUIRE_SERVICES is set and the vLLM venv is missing: {exc}")
        pytest.skip(f"no vLLM venv: {exc}")


def tiny_m_dir(out: Path, seed: int = 0) -> Path:
    """tiny-m's architecture (head size 32, tied embeddings) with random weights, saved.

    The weights are drawn wider than transformers' default (std 0.05, not 0.02), so next-token
    distributions are peaked: greedy decoding then never hinges on a near-tie that another
    kernel's rounding could flip.
    """
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainer.tiny import SPECS

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=320,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        initializer_range=0.05,
        **SPECS["tiny-m"],
    )
    Qwen3ForCausalLM(config).save_pretrained(out)
    return out


def tiny_m_chat_dir(out: Path) -> Path:
    """A local model directory a run can name: the random tiny-m above with the shipped tiny
    tokenizer and a plain chat template (a local directory is prompted through one)."""
    import shutil

    from trainer.tiny_weights import SHIPPED

    tiny_m_dir(out)
    (shipped,) = sorted(SHIPPED.glob("tiny-s-*"))
    shutil.copy(shipped / "tokenizer.json", out / "tokenizer.json")
    settings = json.loads((shipped / "tokenizer_config.json").read_text())
    settings["chat_template"] = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    (out / "tokenizer_config.json").write_text(json.dumps(settings))
    return out


def engine_processes(folder: Path) -> list[int]:
    """The pids of vLLM engine processes working in `folder` (their cwd is the log folder)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (
                os.readlink(proc / "cwd") == str(folder)
                and b"vllm_driver" in (proc / "cmdline").read_bytes()
            ):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids
