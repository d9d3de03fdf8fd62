"""Opt-in fused kernels for the update, from Liger Kernel or torch.compile (config `kernels`;
bench/gpu_check.py --kernels); the exact path is the reference.

The update of a small model is bound by elementwise work (RMSNorm, SwiGLU), each a few passes
over the activations in eager PyTorch. Liger Kernel (`liger-kernel`, Triton; the kernels TRL's
`use_liger_kernel` applies) fuses each into one kernel. `use_kernels(model, "liger")` patches
one Qwen3 model instance: its RMSNorms (the decoder's, the final norm, attention's q/k norms)
and its MLPs' SiLU·up product. Nothing else in the process changes (no class or module
function of transformers is replaced), rotary embeddings and the logits stay exact, and LoRA
layers keep working (the fused MLP calls the wrapped projections).

Only on CUDA: Liger's kernels do not run under Triton's CPU interpreter (liger-kernel 0.8.5
calls `.to` on a Python float inside them), so on the CPU the exact path is the only one and
asking for Liger is an error that says so. Its agreement with the exact path (log-probs and
gradients within stated tolerances) is tested on a GPU (tests/trainer/test_kernels.py) and
measured by `bench/gpu_check.py --kernels liger`. liger-kernel is in requirements.txt (the
update's fused log-probs use it, trainer/head_logprobs.py); a GPU image without Troupe's
requirements installs it with `pip install --no-deps liger-kernel==0.8.5` beside its CUDA
torch and Triton (bench/gpu_check.py's docstring lists the wheel set).

`use_kernels(model, "compile")` is the other lever: the decoder layers compiled by
torch.compile (Inductor; regional, so the compile is one layer's graph, reused by every layer,
and shapes are dynamic, so packed passes of any length share it), for the passes with gradient
only. It runs wherever Inductor does (the CPU with a C++ compiler too); the first pass pays the
compile. Measured against the exact path in one run by `bench/gpu_check.py --compare-kernels
--kernels compile`.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch import nn

from trainer.config import KERNELS


def use_kernels(model: nn.Module, kernels: str) -> int:
    """Patch `model` (a Qwen3 causal LM, before or after LoRA injection) to run `kernels`;
    returns how many modules were patched (0 for "exact"). A clear ValueError when the choice
    is unknown, Liger's model is not on CUDA, or liger-kernel is missing."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {', '.join(KERNELS)}, not {kernels!r}")
    if kernels == "exact":
        return 0
    if kernels == "compile":
        return _compile_layers(model)
    device = next(model.parameters()).device
    if device.type != "cuda":
        raise ValueError(
            f"kernels=liger runs on CUDA only (Liger's Triton kernels have no CPU path); "
            f"this model is on {device.type}: use kernels=exact"
        )
    try:
        from liger_kernel.transformers.monkey_patch import (
            _patch_rms_norm_module,
            _patch_swiglu_module,
        )
        from liger_kernel.transformers.swiglu import LigerSwiGLUMLP
    except ImportError as exc:
        raise ValueError(
            "kernels=liger needs liger-kernel: pip install --no-deps liger-kernel==0.8.5"
        ) from exc
    patched = 0
    for module in model.modules():
        kind = type(module).__name__
        if kind == "Qwen3RMSNorm":
            _patch_rms_norm_module(module)
            patched += 1
        elif kind == "Qwen3MLP":
            _patch_swiglu_module(module, LigerSwiGLUMLP)
            patched += 1
    if not patched:
        raise ValueError(f"kernels=liger: no Qwen3 RMSNorm or MLP in {type(model).__name__}")
    return patched


def _compile_layers(model: nn.Module) -> int:
    """Compile the Qwen3 decoder layers' forward for the update (dynamic shapes); how many
    layers use it. Passes without gradient (generation with its KV cache, the KL reference)
    stay eager: each would be another graph, and a model that samples too would pass Dynamo's
    recompile limit and silently fall back to eager everywhere."""
    layers = [m for m in model.modules() if type(m).__name__ == "Qwen3DecoderLayer"]
    if not layers:
        raise ValueError(f"kernels=compile: no Qwen3 decoder layer in {type(model).__name__}")
    for layer in layers:
        # A method bound to the layer: a deep copy (another policy, the KL reference) rebinds
        # it to the copy, where a closure over this layer would run this layer's weights.
        layer.forward = types.MethodType(_compiled_when_training, layer)
    return len(layers)


_COMPILED: dict[type, Callable] = {}  # layer class -> its compiled forward, shared by all


def _compiled_when_training(layer: nn.Module, *args, **kwargs):
    cls = type(layer)
    if not torch.is_grad_enabled():
        return cls.forward(layer, *args, **kwargs)
    if cls not in _COMPILED:
        _COMPILED[cls] = torch.compile(cls.forward, dynamic=True)
    return _COMPILED[cls](layer, *args, **kwargs)
