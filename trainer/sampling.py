"""Batched, reproducible sampling: one call generates every sequence of one policy in a stage.

Why not `model.generate`: we need (a) the sampling log-prob of every chosen token for GRPO,
(b) a per-row token budget (roles in one batch may have different `max_new_tokens`), and
(c) randomness that depends only on a row's own seed, not on which other rows share the
batch. (c) makes any rollout reproducible from (run seed, step, problem, sample, agent) and
makes a resumed run sample exactly what an uninterrupted one would have.

Sampling is Gumbel-max with counter-based noise: the noise for (row seed, position, token)
is a pure integer hash, so it is identical on every device and batch layout. Temperature 0
is greedy decoding.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

_MASK64 = (1 << 64) - 1
_C1 = 0x9E3779B97F4A7C15
_C2 = 0xBF58476D1CE4E5B9
_C3 = 0x94D049BB133111EB


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 finaliser on int64 tensors (wrapping arithmetic; logical shifts by masking)."""
    x = x ^ ((x >> 30) & ((1 << 34) - 1))
    x = x * torch.tensor(_signed(_C2), dtype=torch.int64, device=x.device)
    x = x ^ ((x >> 27) & ((1 << 37) - 1))
    x = x * torch.tensor(_signed(_C3), dtype=torch.int64, device=x.device)
    x = x ^ ((x >> 31) & ((1 << 33) - 1))
    return x


def row_seed(*parts: int | str) -> int:
    """A 63-bit seed from a tuple like (run seed, step, problem index, sample, agent)."""
    h = 0x243F6A8885A308D3
    for part in parts:
        if isinstance(part, str):
            # The whole string: problem ids share long prefixes ("synthetic-math-test-12"),
            # and a prefix alone gave every problem of a batch the same noise.
            part = int.from_bytes(hashlib.blake2b(part.encode(), digest_size=8).digest(), "little")
        h = (h ^ (part & _MASK64)) * 0x100000001B3 & _MASK64
        h ^= h >> 29
    return h & ((1 << 63) - 1)


def gumbel_noise(seeds: torch.Tensor, position: int, vocab: int, device) -> torch.Tensor:
    """Gumbel(0, 1) noise of shape (B, V) that depends only on (seed, position, token id)."""
    tokens = torch.arange(vocab, device=device, dtype=torch.int64)  # (V,)
    golden = torch.tensor(_signed(_C1), dtype=torch.int64, device=device)
    offset = _signed((position + 1) * _C2)
    x = seeds[:, None] * golden + offset + tokens[None, :]  # (B, V)
    x = _mix(_mix(x))
    u = ((x >> 11) & ((1 << 53) - 1)).to(torch.float64) / float(1 << 53)  # [0, 1)
    u = u.clamp(1e-12, 1 - 1e-12)
    return (-torch.log(-torch.log(u))).to(torch.float32)


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # log-prob of each completion token under the sampling distribution
    truncated: bool  # stopped by the token budget, not by an end token


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    seeds: list[int],
    max_new_tokens: list[int] | int,
    temperature: float,
    eos_ids: set[int] | list[int],
    pad_id: int,
) -> list[Sample]:
    """Left-padded batched decoding with a KV cache; returns one Sample per prompt."""
    if not prompts:
        return []
    device = next(model.parameters()).device
    batch = len(prompts)
    budgets = [max_new_tokens] * batch if isinstance(max_new_tokens, int) else list(max_new_tokens)
    width = max(len(p) for p in prompts)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)  # (B, P)
    attention = torch.zeros((batch, width), dtype=torch.long, device=device)  # (B, P)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        attention[i, width - len(p) :] = 1
    seed_t = torch.tensor(seeds, dtype=torch.int64, device=device)  # (B,)
    budget_t = torch.tensor(budgets, device=device)  # (B,)
    eos_t = torch.tensor(sorted(set(eos_ids)), device=device)
    steps = max(budgets)

    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)  # (B, P)
    # Only the last position's logits: all P of them would be B × P × vocab (trainer/memory.py).
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=position_ids,
        use_cache=True,
        logits_to_keep=1,
    )
    cache = out.cache
    logits = out.logits[:, -1, :].float()  # (B, V)
    next_pos = position_ids[:, -1] + 1  # (B,)

    tokens = torch.full((batch, steps), pad_id, dtype=torch.long, device=device)  # (B, N)
    logps = torch.zeros((batch, steps), dtype=torch.float32, device=device)  # (B, N)
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,)
    ended = torch.zeros(batch, dtype=torch.bool, device=device)  # stopped by an end token
    lengths = torch.zeros(batch, dtype=torch.long, device=device)
    for t in range(steps):
        vocab = logits.shape[-1]
        if temperature > 0:
            scaled = logits / temperature
            choice = (scaled + gumbel_noise(seed_t, t, vocab, device)).argmax(-1)  # (B,)
            logp = torch.log_softmax(scaled, -1).gather(-1, choice[:, None])[:, 0]
        else:
            choice = logits.argmax(-1)
            logp = torch.log_softmax(logits, -1).gather(-1, choice[:, None])[:, 0]
        active = ~done
        tokens[:, t] = torch.where(active, choice, torch.full_like(choice, pad_id))
        logps[:, t] = torch.where(active, logp, torch.zeros_like(logp))
        lengths += active.long()
        is_eos = torch.isin(choice, eos_t) & active
        ended |= is_eos
        done |= is_eos | (lengths >= budget_t)
        if bool(done.all()):
            break
        attention = torch.cat([attention, active.long()[:, None]], dim=1)
        out = model(
            input_ids=tokens[:, t : t + 1],
            attention_mask=attention,
            position_ids=next_pos[:, None],
            cache=cache,
            use_cache=True,
        )
        cache = out.cache
        logits = out.logits[:, -1, :].float()
        next_pos = next_pos + 1

    samples = []
    for i in range(batch):
        n = int(lengths[i])
        samples.append(
            Sample(
                prompt_ids=list(prompts[i]),
                completion_ids=tokens[i, :n].tolist(),
                logprobs=logps[i, :n].tolist(),
                truncated=not bool(ended[i]),
            )
        )
    return samples
