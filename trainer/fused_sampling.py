"""The exact sampler's token pick as one Triton kernel, for CUDA (trainer/sampling.py).

`pick_tokens` in trainer/sampling.py draws the counter-based Gumbel noise with a dozen int64
passes over batch × vocabulary (152k for Qwen3) and then takes the argmax and the log-softmax
in three more: at 128 rows that is gigabytes of memory traffic a decode step. Here one program
per row hashes (seed, position, token) in registers, keeps the running Gumbel-max and an online
log-sum-exp, and writes two numbers: the same noise bits (the same splitmix64 on uint64) and so
the same tokens.

`checked_picker` compares the kernel with the plain code on a small batch before first use and
keeps the plain code when Triton is missing or the two disagree (a warning says why), so a
different Triton or GPU can make sampling slower but never different.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

STATUS = "not tried"  # what the last check decided, for logs and bench/gpu_check.py

BLOCK = 2048  # vocabulary entries a program handles per iteration


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def mix(x):
        x = x ^ (x >> 30)
        x = x * 0xBF58476D1CE4E5B9
        x = x ^ (x >> 27)
        x = x * 0x94D049BB133111EB
        x = x ^ (x >> 31)
        return x

    @triton.jit
    def pick(logits, seeds, position, choice, logp, vocab, stride, inv_temp, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        seed = tl.load(seeds + row).to(tl.uint64)
        t = tl.load(position).to(tl.uint64)
        base = seed * 0x9E3779B97F4A7C15 + (t + 1) * 0xBF58476D1CE4E5B9
        low = tl.full((), 1e-12, tl.float64)
        high = tl.full((), 1.0 - 1e-12, tl.float64)
        best = tl.full((), float("-inf"), tl.float32)
        best_at = tl.full((), 0, tl.int64)
        top = tl.full((), float("-inf"), tl.float32)
        total = tl.full((), 0.0, tl.float32)
        for start in range(0, vocab, BLOCK):
            idx = start + tl.arange(0, BLOCK)
            valid = idx < vocab
            x = tl.load(logits + row * stride + idx, mask=valid, other=float("-inf")) * inv_temp
            h = mix(mix(base + idx.to(tl.uint64)))
            u = (h >> 11).to(tl.float64) / 9007199254740992.0  # 2**53: [0, 1)
            u = tl.minimum(tl.maximum(u, low), high)
            g = (-tl.log(-tl.log(u))).to(tl.float32)
            y = tl.where(valid, x + g, float("-inf"))
            block_best = tl.max(y, axis=0)
            block_at = tl.argmax(y, axis=0).to(tl.int64) + start
            better = block_best > best  # strict: the first maximum wins, as torch.argmax
            best_at = tl.where(better, block_at, best_at)
            best = tl.where(better, block_best, best)
            new_top = tl.maximum(top, tl.max(x, axis=0))
            total = total * tl.exp(top - new_top) + tl.sum(tl.exp(x - new_top), axis=0)
            top = new_top
        chosen = tl.load(logits + row * stride + best_at) * inv_temp
        tl.store(choice + row, best_at)
        tl.store(logp + row, chosen - top - tl.log(total))

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


def checked_picker(reference: Callable) -> Callable:
    """The fused picker if Triton runs it and it agrees with `reference` here, else `reference`."""
    try:
        fast = fused_picker(reference)
        problem = agrees(fast, reference)
    except Exception as exc:  # no Triton, no compiler, an unsupported GPU: sample the plain way
        problem = f"{type(exc).__name__}: {exc}"
    global STATUS
    STATUS = "on" if problem is None else f"off ({problem})"
    (log.info if problem is None else log.warning)("sampling: fused Triton token picker %s", STATUS)
    return fast if problem is None else reference
