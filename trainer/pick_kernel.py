"""The fused token-pick kernel in Triton (trainer/fused_sampling.py says what it computes).

A module of its own because Triton is optional: trainer/fused_sampling.py imports it only when
it is about to run it (on CUDA, or on the CPU under `TRITON_INTERPRET=1`, as the tests do), and
the kernel and its helper must be module globals for Triton (and its interpreter) to resolve one
from the other."""

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
        # While every logit so far is -inf, -inf - -inf would make the sum NaN: shift by 0.
        shift = tl.where(new_top == float("-inf"), 0.0, new_top)
        total = total * tl.exp(top - shift) + tl.sum(tl.exp(x - shift), axis=0)
        top = new_top
    chosen = tl.load(logits + row * stride + best_at) * inv_temp
    tl.store(choice + row, best_at)
    tl.store(logp + row, chosen - top - tl.log(total))
