"""Load the model a config names: a built-in tiny model, a local directory or a Hub id.

A Hub id (e.g. `Qwen/Qwen3-0.6B`) is looked up in the local Hugging Face cache first; when it
is not there it is downloaded into that cache (from `HF_ENDPOINT`, huggingface.co by default)
unless the node must stay offline: `TROUPE_OFFLINE=1` forbids any download, and
`HF_HUB_OFFLINE=1` is honoured the same way. The error then names the model, the variable
that stopped it and the two ways to provide the model. Only the files a model needs are
fetched (config, safetensors weights, tokenizer, generation config), never pickles or other
formats. Real chat models load in bf16 on CUDA (their trainable copies are made fp32 by
trainer/policies.py) and fp32 on the CPU, and are prompted through their chat template with
thinking disabled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from trainer.config import TINY_MODELS
from trainer.offline import offline_reason


class ModelUnavailable(RuntimeError):
    """The named model cannot be loaded on this machine (message says how to fix it)."""


@dataclass
class LoadedModel:
    name: str
    model: torch.nn.Module
    tokenizer: object
    family: str  # "tiny" (compact prompts) or "chat" (chat template)
    path: str


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelUnavailable("device is 'cuda' but no CUDA GPU is visible on this machine")
    return device


def load_model(
    name: str, device: str = "cpu", progress: Callable[[int, int], None] | None = None
) -> LoadedModel:
    """The model and tokenizer for `name`, on `device`, in eval mode. A tiny model comes
    shipped (`trainer/tiny_weights.py`); one whose recipe changed and that is not built yet
    is warm-started first, calling `progress(steps done, steps)` as it goes."""
    from trainer.versions import problems

    if found := problems():
        raise ModelUnavailable("; ".join(found))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name in TINY_MODELS:
        from trainer.tiny_weights import tiny_model_path

        path = tiny_model_path(name, progress=progress)
        family = "tiny"
    else:
        path = _locate(name)
        family = "chat"
    dtype = torch.bfloat16 if device == "cuda" and family == "chat" else torch.float32
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"could not load model {name!r} from {path}: {exc}") from exc
    if family == "chat" and not getattr(tokenizer, "chat_template", None):
        raise ModelUnavailable(
            f"model {name!r} has no chat template; Troupe prompts real models through one"
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, family=family, path=str(path))


def _locate(name: str) -> Path:
    """A local directory as given, or a Hub id resolved in the local cache only."""
    local = Path(os.path.expanduser(name))
    if name.startswith(("/", "./", "../", "~")) or local.is_dir():
        if not (local / "config.json").exists():
            raise ModelUnavailable(
                f"model directory {str(local)!r} has no config.json; point model at a directory "
                "saved with save_pretrained (config, weights and tokenizer)"
            )
        return local
    from huggingface_hub import snapshot_download

    cache_dir = _hub_cache()
    try:
        return Path(snapshot_download(name, local_files_only=True, cache_dir=cache_dir))
    except Exception:  # noqa: BLE001 - any failure means "not in the local cache"
        pass
    provide = (
        f"Provide it either as a local directory (set model to its path) or by pre-populating "
        f"the Hugging Face cache on this machine (`hf download {name}` where there is "
        f"network, then copy HF_HOME)"
    )
    if reason := offline_reason():
        raise ModelUnavailable(
            f"model {name!r} is not in the local Hugging Face cache and {reason}. {provide}"
        )
    endpoint = os.environ.get("HF_ENDPOINT") or None
    try:
        return Path(
            snapshot_download(
                name, cache_dir=cache_dir, endpoint=endpoint, allow_patterns=HUB_FILES
            )
        )
    except Exception as exc:  # noqa: BLE001 - network, auth or a missing repo: say which
        raise ModelUnavailable(
            f"model {name!r} is not in the local Hugging Face cache and downloading it from "
            f"{endpoint or 'huggingface.co'} failed ({type(exc).__name__}: {exc}). {provide}"
        ) from exc


# What a model needs: no pickled weights, no ONNX/GGUF/other-framework copies.
HUB_FILES = ["*.json", "*.safetensors", "tokenizer*", "*.txt", "*.model", "*.jinja"]


def _hub_cache() -> str | None:
    """The cache the environment names now (huggingface_hub reads it only once, at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None
