"""Mixed precision of the policies: fp32 trainable weights and optimizer state, bf16 compute.

Trainable weights (LoRA adapters, or the full model of `finetune=full`) and their AdamW state
stay fp32 everywhere. In bf16 an update of lr·(m/√v) ≈ 2e-5 is below half a unit in the last
place of most weights (bf16 keeps 8 significant bits), so most parameter updates would round
away to nothing. On CUDA the forward and backward passes run under bf16 autocast (matmuls in
bf16, reductions and the loss in fp32); the frozen LoRA base stays bf16, as loaded. On the CPU
everything runs in fp32 as before (CPU autocast to bf16 is slower than fp32 on most cores).

The per-role gradient figures (trainer/gradients.py) snapshot `.grad`, which is fp32 because
the parameters are, so they stay exact.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

PARAM_DTYPE = torch.float32


def compute_dtype(device: torch.device | str) -> torch.dtype:
    """The dtype forward/backward matmuls run in on `device`."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def autocast(device: torch.device | str) -> AbstractContextManager:
    """bf16 autocast on CUDA; nothing on the CPU."""
    if torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return nullcontext()


def dtype_bits(dtype: torch.dtype) -> float:
    """A dtype as a metric value (metrics are numbers): its width in bits, 32 or 16."""
    return float(torch.finfo(dtype).bits)
