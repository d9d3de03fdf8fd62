"""Batched, reproducible sampling: one call generates every sequence of one policy in a stage.

Why not `model.generate`: we need (a) the sampling log-prob of every chosen token for GRPO,
(b) a per-row token budget (roles in one batch may have different `max_new_tokens`), and
(c) randomness that depends only on a row's own seed, not on which other rows share the
batch. (c) makes any rollout reproducible from (run seed, step, problem, sample, agent) and
makes a resumed run sample exactly what an uninterrupted one would have.

Sampling is Gumbel-max with counter-based noise: the noise for (row seed, position, token)
is a pure integer hash, so it is identical on every device and batch layout. Temperature 0
is greedy decoding.

Why the decode loop looks the way it does (speed on a GPU, same tokens everywhere):

- The KV cache is static (transformers' `StaticCache`, prompt width + the longest budget) and
  the attention mask is a preallocated (B, cache length) boolean that each step updates in
  place, so every decode step has the same shapes and reads and writes the same buffers.
- The loop's state (the step index, the last tokens, positions, budgets, `done`) lives in
  device tensors and the step never asks the host anything: `done` is looked at once every
  `CHECK_EVERY` steps (one host sync), and rows that finished in between keep writing padding,
  exactly as if the loop had stopped for them.
- On CUDA one decode step (forward + sampling) is captured once per call as a CUDA graph and
  replayed (in one process; the ranks of a sharded run decode eagerly): a 0.6B model's step is
  hundreds of small kernels whose launches, not the GPU's arithmetic, bound an eager loop.
  `trainer/fused_sampling.py` draws the noise and picks the token in one Triton kernel there
  (checked against the plain code below before first use).
- Those two choices are a `Decoding` the caller passes and keeps (the hf engine holds one for
  its life), not process state: `Decoding.for_device` checks the fused picker once, and a
  capture that fails switches graphs off in that object only, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

_MASK64 = (1 << 64) - 1
_C1 = 0x9E3779B97F4A7C15
_C2 = 0xBF58476D1CE4E5B9
_C3 = 0x94D049BB133111EB

# Decode steps between two looks at whether every row is done, by device type. On a GPU each
# look is a host sync that costs more than a step (and a CUDA graph replays steps only between
# looks); a finished batch runs at most CHECK_EVERY - 1 idle steps. On the CPU a look is free.
CHECK_EVERY = {"cuda": 16, "cpu": 1}


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 finaliser on int64 tensors (wrapping arithmetic; logical shifts by masking).
    The constants are Python scalars, not tensors: a tensor made here would be a host-to-device
    copy, which a CUDA graph cannot hold."""
    x = x ^ ((x >> 30) & ((1 << 34) - 1))
    x = x * _signed(_C2)
    x = x ^ ((x >> 27) & ((1 << 37) - 1))
    x = x * _signed(_C3)
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


def gumbel_noise(
    seeds: torch.Tensor, position: int | torch.Tensor, vocab: int, device
) -> torch.Tensor:
    """Gumbel(0, 1) noise of shape (B, V) that depends only on (seed, position, token id).
    `position` is an int, or a one-element int64 tensor on `device` (the graph-captured loop's
    step counter); both give the same bits."""
    tokens = torch.arange(vocab, device=device, dtype=torch.int64)  # (V,)
    if isinstance(position, torch.Tensor):
        offset = (position.view(1, 1) + 1) * _signed(_C2)  # wraps mod 2**64, as _signed does
    else:
        offset = _signed((position + 1) * _C2)
    x = seeds[:, None] * _signed(_C1) + offset + tokens[None, :]  # (B, V)
    x = _mix(_mix(x))
    u = ((x >> 11) & ((1 << 53) - 1)).to(torch.float64) / float(1 << 53)  # [0, 1)
    u = u.clamp(1e-12, 1 - 1e-12)
    return (-torch.log(-torch.log(u))).to(torch.float32)


def pick_tokens(
    logits: torch.Tensor, seeds: torch.Tensor, position: int | torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled token of each row and its log-prob under the sampling distribution.

    logits: (B, V) float32. Gumbel-max at `temperature` (> 0), argmax at 0."""
    if temperature <= 0:
        choice = logits.argmax(-1)
        return choice, torch.log_softmax(logits, -1).gather(-1, choice[:, None])[:, 0]
    scaled = logits / temperature
    noise = gumbel_noise(seeds, position, logits.shape[-1], logits.device)
    choice = (scaled + noise).argmax(-1)  # (B,)
    return choice, torch.log_softmax(scaled, -1).gather(-1, choice[:, None])[:, 0]


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # log-prob of each completion token under the sampling distribution
    truncated: bool  # stopped by the token budget, not by an end token


class _Decode:
    """One generate call's buffers and its decode step, which updates them in place.

    Fixed shapes, device tensors only and no host reads, so that on CUDA the step can be
    captured once as a graph and replayed. Step t (t ≥ 1) feeds token t-1 (padding for a row
    that was already done) at cache column `width + t - 1` and samples token t."""

    def __init__(
        self,
        model,
        cache,
        logits,
        *,
        seeds,
        budgets,
        eos,
        pad_id,
        width,
        steps,
        temperature,
        mask,
        positions,
        pick,
    ):
        batch, device = logits.shape[0], logits.device
        self.model, self.cache, self.logits = model, cache, logits
        self.seeds, self.budgets, self.eos, self.pad_id = seeds, budgets, eos, pad_id
        self.temperature, self.pick = temperature, pick
        self.mask = mask  # (B, L) bool: which cache columns each row attends to
        self.positions = positions  # (B, 1) position id of the token fed next
        self.t = torch.zeros(1, dtype=torch.long, device=device)  # index of the next sample
        self.column = torch.full((1,), width - 1, dtype=torch.long, device=device)
        self.tokens = torch.full((batch, steps), pad_id, dtype=torch.long, device=device)
        self.logps = torch.zeros((batch, steps), dtype=torch.float32, device=device)
        self.done = torch.zeros(batch, dtype=torch.bool, device=device)
        self.ended = torch.zeros(batch, dtype=torch.bool, device=device)  # by an end token
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        self.fed = torch.full((batch, 1), pad_id, dtype=torch.long, device=device)
        self.fed_active = torch.zeros((batch, 1), dtype=torch.bool, device=device)
        self.masks = {kind: self.mask[:, None, None, :] for kind in _layer_kinds(model)}

    def sample(self) -> None:
        """Sample token t from `logits` into the buffers; advance t."""
        choice, logp = self.pick(self.logits, self.seeds, self.t, self.temperature)
        active = ~self.done
        chosen = torch.where(active, choice, torch.full_like(choice, self.pad_id))
        self.tokens.index_copy_(1, self.t, chosen[:, None])
        self.logps.index_copy_(
            1, self.t, torch.where(active, logp, torch.zeros_like(logp))[:, None]
        )
        self.lengths += active.long()
        is_eos = (choice[:, None] == self.eos[None, :]).any(-1) & active
        self.ended |= is_eos
        self.done |= is_eos | (self.lengths >= self.budgets)
        self.fed.copy_(chosen[:, None])
        self.fed_active.copy_(active[:, None])
        self.t += 1

    def step(self) -> None:
        """Feed the last sampled token, then sample the next one."""
        self.column += 1
        # The fed token is context only for rows that were active when they sampled it.
        self.mask.index_copy_(1, self.column, self.fed_active)
        out = self.model(
            input_ids=self.fed,
            attention_mask=self.masks,
            position_ids=self.positions,
            cache=self.cache,
            use_cache=True,
        )
        self.logits.copy_(out.logits[:, -1, :])
        self.positions += 1
        self.sample()


def _layer_kinds(model) -> set[str]:
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ValueError(f"the exact sampler supports full-attention models only, not {kinds}")
    return kinds


def _prefill_mask(attention: torch.Tensor, width: int) -> torch.Tensor:
    """(B, 1, P, L) boolean mask of the prompt pass over the (B, L) cache columns `attention`
    allows: causal within the prompt, no padding columns, and a padding row attends to itself
    alone (a row with nothing to attend to would give the cache NaN keys and values, which a
    zero attention weight times NaN would spread)."""
    rows = torch.arange(width, device=attention.device)[:, None]  # (P, 1)
    cols = torch.arange(attention.shape[1], device=attention.device)[None, :]  # (1, L)
    causal = (cols <= rows)[None, None] & attention[:, None, None, :]
    return causal | (cols == rows)[None, None]


def _across_ranks() -> bool:
    """Whether this process is one rank of several: a sharded policy's forward is a collective,
    and a capture that failed on one rank and not another would leave them out of step."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _finished(done: torch.Tensor) -> bool:
    """Whether every row is done: the loop's only host sync, every CHECK_EVERY steps."""
    return bool(done.all())


def _captured(step: Callable[[], None], decoding: Decoding) -> Callable[[], None]:
    """Run `step` once (for real: CUDA warm-up on a side stream), capture it as a CUDA graph and
    return the graph's replay, which updates the step's buffers in place. A step that cannot
    be captured (a model whose forward reads the host) is returned as it is and `decoding`
    captures no more, with a warning: slower, the same samples."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # capture_begin/end rather than `torch.cuda.graph`, whose entry collects garbage and empties
    # the allocator's cache: once per generate call, that cost more than the decoding it saved.
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin()
            try:
                step()
            finally:
                graph.capture_end()
    except RuntimeError as exc:  # nothing ran: a failed capture launches no kernel
        decoding.cuda_graphs = False
        log.warning("sampling: decode steps run without CUDA graphs (capture failed: %s)", exc)
        return step
    torch.cuda.current_stream().wait_stream(stream)
    return graph.replay


@dataclass
class Decoding:
    """How `generate` decodes: the token picker (`pick_tokens`' signature and results) and
    whether a GPU's decode steps are captured as CUDA graphs. The caller keeps it."""

    pick: Callable = pick_tokens
    cuda_graphs: bool = True
    picker: str = "plain"  # which picker, and why (logs, bench/gpu_check.py)

    @classmethod
    def for_device(cls, device: torch.device | str) -> Decoding:
        """On CUDA the fused Triton picker when it agrees with `pick_tokens` there (checked
        now, once: keep the result), elsewhere the plain picker."""
        if torch.device(device).type != "cuda":
            return cls()
        from trainer.fused_sampling import checked_picker

        pick, status = checked_picker(pick_tokens, device)
        return cls(pick=pick, picker=status)


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
    decoding: Decoding | None = None,
) -> list[Sample]:
    """Left-padded batched decoding with a static KV cache; returns one Sample per prompt.
    `decoding` (default: the plain picker, CUDA graphs on a GPU) says how (`Decoding`)."""
    from transformers import StaticCache

    decoding = decoding if decoding is not None else Decoding()
    if not prompts:
        return []
    device = next(model.parameters()).device
    batch = len(prompts)
    budgets = [max_new_tokens] * batch if isinstance(max_new_tokens, int) else list(max_new_tokens)
    width = max(len(p) for p in prompts)
    steps = max(budgets)
    length = width + steps  # the cache: prompt columns, then one column per decode step
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)  # (B, P)
    attention = torch.zeros((batch, length), dtype=torch.bool)  # (B, L)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        attention[i, width - len(p) : width] = True
    input_ids, attention = input_ids.to(device), attention.to(device)
    position_ids = (attention[:, :width].long().cumsum(-1) - 1).clamp(min=0)  # (B, P)

    cache = StaticCache(config=model.config, max_cache_len=length)
    prefill = _prefill_mask(attention, width)
    # Only the last position's logits: all P of them would be B × P × vocab (trainer/memory.py).
    out = model(
        input_ids=input_ids,
        attention_mask={kind: prefill for kind in _layer_kinds(model)},
        position_ids=position_ids,
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    del prefill
    logits = out.logits[:, -1, :].float()  # (B, V): the decode step's fixed logits buffer
    on_gpu = device.type == "cuda"
    decode = _Decode(
        model,
        cache,
        logits,
        seeds=torch.tensor(seeds, dtype=torch.int64, device=device),
        budgets=torch.tensor(budgets, dtype=torch.long, device=device),
        eos=torch.tensor(sorted(set(eos_ids)) or [-1], dtype=torch.long, device=device),
        pad_id=pad_id,
        width=width,
        steps=steps,
        temperature=temperature,
        mask=attention,
        positions=position_ids[:, -1:] + 1,
        pick=decoding.pick,
    )
    decode.sample()
    step = decode.step
    every = CHECK_EVERY.get(device.type, 1)
    for t in range(1, steps):
        if t % every == 0 and _finished(decode.done):
            break
        if t == 1 and on_gpu and decoding.cuda_graphs and not _across_ranks():
            step = _captured(decode.step, decoding)  # runs step 1 itself
            continue
        step()
    return _samples(prompts, decode)


def _samples(prompts: list[list[int]], decode: _Decode) -> list[Sample]:
    """One copy to the host of everything the call produced, then one Sample per row."""
    lengths = decode.lengths.tolist()
    tokens, logps = decode.tokens.tolist(), decode.logps.tolist()
    ended = decode.ended.tolist()
    return [
        Sample(
            prompt_ids=list(prompt),
            completion_ids=tokens[i][: lengths[i]],
            logprobs=logps[i][: lengths[i]],
            truncated=not ended[i],
        )
        for i, prompt in enumerate(prompts)
    ]
