"""The forward and backward passes of optimizer steps: which turns go through the model together.

One open optimizer step of one policy is a `Lane`: its turns by (role, agent) segment, in the
plan's segment order, with the normaliser of its whole optimizer batch (trainer/loss.py) and
what to call when a segment's last backward pass is done (the gradient tracker's
`end_segment`, trainer/gradients.py). `run_passes` walks one or several lanes:

- A segment's turns come in groups (`grad_drill.groups`: the whole segment, or each recorded
  episode's turns first when a drill-down is active). A pass takes from each lane turns of one
  group only, so every lane's `.grad` can be snapshotted at each group's and segment's end:
  the per-agent and per-role figures and the episodes' shares stay exact.
- A pass holds at most `micro_batch_size` turns, or with `micro_batch_tokens` > 0 at most that
  many tokens packed (trainer/loss.py: rows as long as the longest turn, whose padded ends
  count; a longer turn alone); -1 sizes the budget to the GPU's memory (`Config.token_budget`,
  resolved once per call). It is filled lane by lane, in order; one lane's passes are
  therefore `grad_drill.chunks` of its groups, exactly as when policies were updated one
  after another.
- Several lanes share a pass only when asked (`batch_adapters`) and the policies are LoRA
  adapters on one base (`PolicySet.shares_passes`): the turns are laid out policy by policy
  and each policy's tokens go through its own adapter (trainer/joint_lora.py). The base runs
  once over all of them (under `per_role` one pass can hold a segment of every role) and since
  each adapter sees only its own tokens, each policy gets the gradient it would get alone.
- The loss of a pass is the sum of each lane's GRPO loss over its own rows, with its own
  normaliser and KL coefficient; the statistics go to the lane, by role.
- Sharded policies (FSDP2) run alone, and every rank runs each segment's largest pass count
  (`micro_counts`), padding with zero-gradient passes, so the collectives line up.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch

from trainer import grad_drill
from trainer.config import Config
from trainer.episode import Turn
from trainer.loss import (
    Batch,
    PackedBatch,
    PackedSize,
    batch_logprobs,
    grpo_loss,
    make_batch,
    make_packed_batch,
)
from trainer.policies import PolicySet

Stats = dict[str, dict[str, float]]  # role -> summed statistic -> value
Segment = tuple[str, str]  # (role, agent)


def _stats() -> Stats:
    return defaultdict(lambda: defaultdict(float))


@dataclass
class Lane:
    """One policy's turns of one optimizer step, and the statistics its passes produce."""

    policy: str
    segments: list[Segment]  # in the order they run
    turns: dict[Segment, list[Turn]]
    normalizer: float
    on_segment: Callable[[str, str], None] | None = None
    micro_counts: dict[Segment, int] | None = None  # sharded: passes per segment on every rank
    loss_scale: float = 1.0  # sharded: FSDP2 averages over ranks; scaled, the average is a sum
    stats: Stats = field(default_factory=_stats)


@dataclass
class _Part:
    """What one lane puts into one pass: turns of one group of one role."""

    lane: Lane
    role: str
    turns: list[Turn]


def _walk(lane: Lane, policies: PolicySet, config: Config) -> Iterator[tuple[str, list[Turn]]]:
    """The lane's groups in order, as (role, turns); when the caller asks for the next one,
    the backward passes of this one are done (snapshots and `on_segment` happen here)."""
    params = policies.parameters(lane.policy)
    size, tokens = config.micro_batch_size, config.micro_batch_tokens
    for role, agent in lane.segments:
        segment = lane.turns.get((role, agent), [])
        if lane.micro_counts is not None:  # sharded: every rank runs as many passes (lock-step)
            own = grad_drill.micro_batch_count(segment, size, tokens)
            for _ in range(lane.micro_counts[(role, agent)] - own):
                policies.zero_backward(lane.policy)
        for group in grad_drill.groups(lane.policy, role, segment, params):
            yield role, group
        if lane.on_segment is not None:
            lane.on_segment(role, agent)


def _fill(heads: list[tuple[str, list[Turn]] | None], config: Config) -> list[tuple[int, int]]:
    """Which lanes give how many turns to the next pass: (lane index, count) pairs, lane by
    lane within the budget (packed: the rows' padded ends count, `PackedSize`); an empty pass
    takes the first turn whatever its length."""
    size, budget = config.micro_batch_size, config.micro_batch_tokens
    taken: list[tuple[int, int]] = []
    rows = 0
    packed = PackedSize()
    for i, head in enumerate(heads):
        if head is None:
            continue
        count = 0
        for turn in head[1]:
            length = len(turn.prompt_ids) + len(turn.completion_ids)
            fits = packed.tokens_with(length) <= budget if budget > 0 else rows < size
            if rows and not fits:
                break
            count, rows = count + 1, rows + 1
            packed.add(length)
        if count:
            taken.append((i, count))
    return taken


def run_passes(policies: PolicySet, lanes: list[Lane], config: Config, pad_id: int) -> None:
    """Forward and backward every lane's turns, adding to each policy's `.grad` (module
    docstring); several lanes share passes, so their policies must allow it."""
    if len({lane.policy for lane in lanes}) != len(lanes):
        raise ValueError("one lane per policy")
    if len(lanes) > 1 and not policies.shares_passes:
        raise ValueError("only LoRA policies on one unsharded base share passes")
    if config.micro_batch_tokens < 0:  # auto: sized to the GPU's memory, once
        config = dataclasses.replace(config, micro_batch_tokens=config.token_budget)
    walks = [_walk(lane, policies, config) for lane in lanes]
    heads = [next(walk, None) for walk in walks]  # each lane's open group: (role, turns left)
    while any(head is not None for head in heads):
        taken = _fill(heads, config)
        parts = [_Part(lanes[i], heads[i][0], heads[i][1][:n]) for i, n in taken]
        _backward(policies, parts, config, pad_id)
        for i, n in taken:
            role, rest = heads[i]
            heads[i] = (role, rest[n:]) if len(rest) > n else next(walks[i], None)


def _collate(turns: list[Turn], config: Config, pad_id: int, device) -> Batch:
    collate = make_packed_batch if config.micro_batch_tokens > 0 else make_batch
    return collate(turns, pad_id, device=device)


def _trained(policies: PolicySet, parts: list[_Part], batch: Batch) -> AbstractContextManager:
    """The model for the pass: the one policy, or each part's tokens through its adapter."""
    if len(parts) == 1:
        return policies.use(parts[0].lane.policy, train=True)
    # Where each turn starts in the batch's tokens, flattened: a part's span runs from its
    # first turn's start to the next part's (a packed row's padded end goes with its last turn).
    rows, width = batch.input_ids.shape
    starts = batch.starts if isinstance(batch, PackedBatch) else [i * width for i in range(rows)]
    bounds, first = [], 0
    for part in parts:
        bounds.append(starts[first])
        first += len(part.turns)
    bounds.append(rows * width)
    spans = [(p.lane.policy, a, b) for p, a, b in zip(parts, bounds, bounds[1:])]
    return policies.use_many(spans)


def _backward(policies: PolicySet, parts: list[_Part], config: Config, pad_id: int) -> None:
    """One forward and backward pass over the parts' turns (laid out part by part)."""
    device = policies.device
    batch = _collate([t for p in parts for t in p.turns], config, pad_id, device)
    if batch.completion_len == 0:
        for part in parts:
            part.lane.stats[part.role]["seqs"] += len(part.turns)  # counted, as in TRL
            if part.lane.micro_counts is not None:  # sharded: the pass still takes place
                policies.zero_backward(part.lane.policy)
        return
    betas = [config.kl_for(part.role) for part in parts]
    ref_logps = None
    # KL to the base model only where it is penalised: at beta 0 the reference forward (a
    # no-grad pass as large as the policy's own) would buy a metric and no gradient.
    if any(beta > 0 for beta in betas):
        with policies.reference() as ref:
            ref_logps, _ = batch_logprobs(
                ref, batch, config.temperature, with_entropy=False, fused=config.fused_logprobs
            )
    with _trained(policies, parts, batch) as model:
        logps, entropies = batch_logprobs(
            model, batch, config.temperature, fused=config.fused_logprobs
        )
        total, start = None, 0
        for part, beta in zip(parts, betas):
            n = len(part.turns)
            rows = slice(start, start + n)
            start += n
            loss, stats = grpo_loss(
                logps[rows],
                batch.old_logps[rows],
                batch.advantages[rows],
                batch.completion_mask[rows],
                clip_low=config.clip_low,
                clip_high=config.clip_high,
                loss_agg=config.loss_agg,
                normalizer=part.lane.normalizer,
                ref_logps=ref_logps[rows] if beta > 0 else None,
                kl_beta=torch.full((n,), beta, device=device) if beta > 0 else None,
                entropies=entropies[rows],
                is_weights=None if batch.is_weights is None else batch.is_weights[rows],
            )
            if part.lane.loss_scale != 1.0:
                loss = loss * part.lane.loss_scale
            total = loss if total is None else total + loss
            role_stats = part.lane.stats[part.role]
            for key, value in stats.items():
                role_stats[key] += value
            if beta > 0:
                role_stats["kl_tokens"] += stats["tokens"]
        total.backward()
