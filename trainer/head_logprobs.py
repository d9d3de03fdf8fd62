"""Token log-probs from the final hidden states without the whole vocabulary's logits
(`fused_logprobs`), by Liger Kernel's chunked selective log-prob.

The exact path (trainer/loss.py) asks the model for the logits of every position the loss
reads: K positions × a 151,936-token vocabulary, in the compute dtype, plus the copies the
temperature, the log-softmax and their gradients make. At a pass of 16,384 tokens that is
several GB, the largest term of a small model's update (trainer/memory.py), and what bounds its
token budget. Here the decoder runs without its output layer, and Liger's
`_ChunkedSelectiveLogProbFunction` (reached through `LigerFusedLinearPPOBase.chunk_forward`,
the piece its fused GRPO loss is built on) computes each kept position's log-prob in chunks of
2,048 positions × 4,096 vocabulary entries with an online log-sum-exp, keeps only the log-sum-
exp for the backward pass and recomputes each chunk's logits there. Nothing else changes: the
log-probs feed the same GRPO loss, per-role segments and statistics as the exact path's
(Liger's whole fused loss cannot: it normalises per call, takes one KL coefficient and gives
no entropy).

The entropy, a statistic only, is computed without gradient over chunks of ENTROPY_ROWS
positions: one more output-layer matmul per kept token, and never more than ENTROPY_ROWS rows
of logits at once.

Liger's function is plain PyTorch (it runs on the CPU too; tests/trainer/test_head_logprobs.py
checks it against the exact path there). It bypasses the output layer's module, so it needs a
plain `nn.Linear` head (not LoRA on `lm_head`) and one process (FSDP2 and DDP gather and sync
through module calls); trainer/config.py refuses the rest.
"""

from __future__ import annotations

import torch
from torch import nn
from trl.trainer.utils import entropy_from_logits

from trainer.memory import ENTROPY_ROWS  # positions whose logits the entropy holds at once


def decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Linear]:
    """The decoder stack (hidden states out) and the output layer of a causal LM, through a
    peft wrapper. A clear ValueError where the head is not a plain linear layer."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder, head = getattr(lm, "model", None), getattr(lm, "lm_head", None)
    if decoder is None or type(head) is not nn.Linear:
        raise ValueError(
            f"fused_logprobs needs a causal LM with a plain linear output layer; "
            f"{type(lm).__name__}'s is {type(head).__name__} (LoRA on lm_head is not supported)"
        )
    return decoder, head


def head_logprobs(
    head: nn.Linear,
    hidden: torch.Tensor,  # (..., H) the final hidden states of the positions the loss reads
    targets: torch.Tensor,  # (...) the token each position predicts
    temperature: float,
    *,
    with_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of `targets` (differentiable in `hidden` and the head's weight) and, when
    asked, entropies (no gradient), both under `temperature` and shaped like `targets`."""
    from liger_kernel.chunked_loss.fused_linear_ppo import LigerFusedLinearPPOBase

    flat = hidden.reshape(1, -1, hidden.shape[-1])  # Liger's (batch, positions, hidden)
    logps = LigerFusedLinearPPOBase.chunk_forward(
        flat, head.weight, targets.reshape(1, -1), head.bias, temperature
    )
    entropies = None
    if with_entropy:
        with torch.no_grad():
            entropies = torch.cat(
                [_entropy(head, chunk, temperature) for chunk in flat[0].split(ENTROPY_ROWS)]
            ).view(targets.shape)
    return logps.view(targets.shape), entropies


def _entropy(head: nn.Linear, hidden: torch.Tensor, temperature: float) -> torch.Tensor:
    """Entropies of a chunk of positions: its logits once in fp32, divided in place."""
    logits = head(hidden).float()
    return entropy_from_logits(logits.div_(temperature))
