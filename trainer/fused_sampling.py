"""The exact sampler's token pick as one Triton kernel, for CUDA (trainer/sampling.py).

`pick_tokens` in trainer/sampling.py draws the counter-based Gumbel noise with a dozen int64
passes over batch × vocabulary (152k for Qwen3) and then takes the argmax and the log-softmax
in three more: at 128 rows that is gigabytes of memory traffic a decode step. Here one program
per row hashes (seed, position, token) in registers, keeps the running Gumbel-max and an online
log-sum-exp, and writes two numbers: the same noise bits (the same splitmix64 on uint64) and so
the same tokens.

`checked_picker` compares the kernel with the plain code on a small batch before first use and
keeps the plain code when Triton is missing or the two disagree (a warning says why), so a
different Triton or GPU can make sampling slower but never different. It returns its decision
with the picker; the caller keeps both (`trainer.sampling.Decoding`), nothing here remembers.
On the CPU the kernel runs under Triton's interpreter (`TRITON_INTERPRET=1` before the kernel
module is imported): slow, but the same program, which is how the tests check it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

BLOCK = 2048  # vocabulary entries a program handles per iteration


def _kernel():
    """The Triton kernel (imported here: Triton is optional, and only CUDA or its
    interpreter runs it)."""
    from trainer.pick_kernel import pick

    return pick


def fused_picker(reference: Callable) -> Callable:
    """A picker with `reference`'s signature that runs the kernel when it can."""
    kernel = _kernel()

    def pick(logits, seeds, position, temperature):
        if temperature <= 0 or not isinstance(position, torch.Tensor):
            return reference(logits, seeds, position, temperature)
        batch, vocab = logits.shape
        choice = torch.empty(batch, dtype=torch.long, device=logits.device)
        logp = torch.empty(batch, dtype=torch.float32, device=logits.device)
        # torch divides a CUDA tensor by a scalar as a multiply by its float32 reciprocal.
        inv_temp = float(torch.tensor(1.0) / torch.tensor(float(temperature)))
        kernel[(batch,)](
            logits,
            seeds,
            position,
            choice,
            logp,
            vocab,
            logits.stride(0),
            inv_temp,
            BLOCK=BLOCK,
            num_warps=8,
        )
        return choice, logp

    return pick


def agrees(fast: Callable, reference: Callable, device: str = "cuda") -> str | None:
    """None when `fast` picks what `reference` picks on a test batch, else what differed."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    for vocab, position in ((5003, 0), (151936, 37)):
        logits = (torch.randn(8, vocab, generator=gen) * 3).to(device)
        seeds = torch.randint(0, 2**62, (8,), generator=gen).to(device)
        where = torch.tensor([position], device=device)
        for temperature in (0.7, 1.0):
            got = fast(logits, seeds, where, temperature)
            want = reference(logits, seeds, where, temperature)
            if not torch.equal(got[0], want[0]):
                return f"tokens differ at vocab {vocab}, temperature {temperature}"
            gap = (got[1] - want[1]).abs().max().item()
            if gap > 1e-4:
                return f"log-probs differ by {gap:.2e} at vocab {vocab}"
    return None


def checked_picker(
    reference: Callable, device: torch.device | str = "cuda"
) -> tuple[Callable, str]:
    """(the fused picker, "on") if Triton runs it on `device` and it agrees with `reference`
    there, else (`reference`, "off (why)")."""
    try:
        fast = fused_picker(reference)
        problem = agrees(fast, reference, device)
    except Exception as exc:  # no Triton, no compiler, an unsupported GPU: sample the plain way
        problem = f"{type(exc).__name__}: {exc}"
    status = "on" if problem is None else f"off ({problem})"
    (log.info if problem is None else log.warning)("sampling: fused Triton token picker %s", status)
    return (fast if problem is None else reference), status
