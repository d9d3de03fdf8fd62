"""Batched multi-adapter LoRA: one forward and backward pass whose tokens use different adapters.

Under `finetune: lora` every policy is an adapter on one frozen base (trainer/policies.py). A
pass that holds several policies' turns runs the base once over all of them (one large matmul
per layer instead of one per policy) and adds each adapter's low-rank update only to its own
tokens, so each adapter's gradient comes from its own turns alone: the same gradient, up to the
base matmul's float rounding, as a pass per policy.

How: inside `routed(model, spans)` every peft LoRA layer has no active adapter (it computes the
base layer only, and peft's own adapter loop adds nothing) and a forward hook adds
B_p(A_p(x[start:stop])) · scale_p for each span (policy p, tokens [start, stop) of the batch
flattened to one row of tokens). The caller orders a pass's turns by policy, so each policy's
tokens are one contiguous span and the hook slices instead of gathering; the spans cover every
token. The hook stays registered until the context ends, so it also runs when gradient
checkpointing recomputes a layer in the backward pass (call backward inside the context).

Supported: peft's plain LoRA on linear layers inside the decoder (`all-linear` or named
projections). Not supported, and then the update runs one pass per policy as before
(`supported`): LoRA variants (DoRA and the like), LoRA on embeddings or on the output head
(whose input is not one row per batch token when only some positions' logits are computed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

Span = tuple[str, int, int]  # (adapter, first token, end token) of the flattened batch


def lora_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every peft LoRA layer of `model`, with its qualified name."""
    from peft.tuners.lora import LoraLayer

    return [(name, m) for name, m in model.named_modules() if isinstance(m, LoraLayer)]


def supported(model: nn.Module) -> bool:
    """Whether every LoRA layer of `model` can take part in a routed pass (module docstring)."""
    from peft.tuners.lora import Linear

    layers = lora_layers(model)
    return bool(layers) and all(
        type(m) is Linear and not m.lora_variant and not name.endswith("lm_head")
        for name, m in layers
    )


def _routed_hook(spans: list[Span]):
    def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        x = args[0]
        flat = x.reshape(-1, x.shape[-1])  # (N, in)
        if spans[-1][2] != flat.shape[0]:
            raise RuntimeError(
                f"routed LoRA spans cover {spans[-1][2]} tokens, the layer saw {flat.shape[0]}"
            )
        pieces = []
        for adapter, start, stop in spans:
            a, b = module.lora_A[adapter], module.lora_B[adapter]
            part = module._cast_input_dtype(flat[start:stop], a.weight.dtype)
            pieces.append(b(a(part)) * module.scaling[adapter])  # (stop - start, out)
        delta = torch.cat(pieces).view(*output.shape[:-1], -1)
        return (output + delta).to(output.dtype)

    return hook


@contextmanager
def routed(model: nn.Module, spans: list[Span]) -> Iterator[nn.Module]:
    """`model` with tokens [start, stop) of the flattened batch going through `adapter`'s LoRA,
    for each span (contiguous, in order, from token 0). Afterwards no adapter is active: the
    caller activates the one it needs next (PolicySet.use does, every time)."""
    if not spans or spans[0][1] != 0 or any(a[2] != b[1] for a, b in zip(spans, spans[1:])):
        raise ValueError(f"spans must tile the batch's tokens from 0 in order: {spans}")
    layers = [m for _, m in lora_layers(model)]
    hook = _routed_hook(spans)
    handles = []
    try:
        for layer in layers:
            layer.set_adapter([])  # base only; requires_grad is the caller's to set
            handles.append(layer.register_forward_hook(hook))
        yield model
    finally:
        for handle in handles:
            handle.remove()
