"""One training step's policy update: GRPO on every policy, with exact per-role gradient figures.

`update_policies(policies, turns, config, tokenizer_pad_id=…)` takes the step's turns (with
their advantages filled in by trainer/advantages.py) and returns the step's metrics.

How this differs from textbook GRPO (one policy, one clipped loss over a batch of completions):

- Many policies. Each turn carries the policy that generated it (trainer/policies.py); each
  policy gets its own loss over its own turns, its own normaliser, clip, optimizer step and
  schedule step. A policy with no turns this step is left alone (its schedule does not move).
- A sample is a turn, not an episode: the prompt (which may hold other agents' outputs) is
  context, the loss covers only the turn's completion tokens. Advantages come from
  (problem, role) or (problem, agent) groups, so an episode's turns can get different ones.
- The "old" log-probs are the sampling log-probs recorded at rollout. With one mini-batch the
  ratio is 1 up to kernel numerics (dropout is off); with `mini_batches` > 1 each policy's turns
  are split into that many optimizer steps and the ratio moves after the first one, so the
  clip bites. The split is stratified (round robin over turns sorted by role and agent), so
  every optimizer step sees every role; it is deterministic, no shuffling.
- Segments. Within an optimizer step, turns run ordered by role (workflow order) then agent,
  micro-batches never straddle an agent, and `GradientTracker` (trainer/gradients.py)
  snapshots the accumulated gradient between agents: the per-agent and per-role gradients,
  their norms, shares and cosines are exact and need no extra backward pass. `instrument=False`
  skips this (the parameters come out bit-identical either way when the coherence regulariser
  is off). The loss of a micro-batch is a sum over its sequences divided by the normaliser of
  the whole optimizer batch (trainer/loss.py), so accumulation is exact. A micro-batch is
  `micro_batch_size` turns, padded, or with `micro_batch_tokens` > 0 as many turns as fit in
  that many tokens, packed (trainer/loss.py's packed layout; the rows' padded ends count).
  Which turns share a pass is trainer/passes.py's: with `batch_adapters` (LoRA, one
  process) the policies take their k-th optimizer steps together and one pass holds several
  policies' turns, each policy's tokens through its own adapter (trainer/joint_lora.py), at
  most one agent's turns per policy.
- Coherence regulariser (`coherence_lambda` > 0): before clipping, each role's gradient is
  scaled by 1 − λ·max(0, cos(g_role, EMA of g_role)) and the gradient rebuilt from the scaled
  role gradients. The EMA lives on the PolicySet (and in its state_dict).
- Data parallel (`world`, trainer/distributed.py): `turns` are this rank's; every rank walks
  one plan of policies, optimizer batches and segments (`update_plan`, from all ranks' turns;
  compared across ranks, a difference fails with a message), the normaliser counts and the
  statistics are summed over ranks, and so is the gradient (segment by segment when tracked,
  else in one flat all-reduce), so the weights, the loss and every figure are one process's.
  Fully fine-tuned policies are sharded instead (FSDP2, trainer/sharding.py): FSDP2 reduces
  each backward pass's gradient, the loss is scaled by the rank count so the reduction is a
  sum, every rank runs each segment's largest micro-batch count (padding with zero-gradient
  passes) and the tracker all-reduces only dot products of its gradient shards.
- Then clipping of each policy's gradient to `grad_clip` (0 = off) and AdamW. A non-finite
  gradient skips that policy's optimizer step (`policy/<p>/skipped` = 1) instead of writing
  NaN into the weights.

Metrics (docs/design.md §5), and how they are aggregated:

- Gradient figures are per optimizer step. With several mini-batches they are averaged over
  the step's optimizer steps (those in which the role, agent or pair took part). A role that
  spans several policies (`per_agent`: one adapter per generator) has the norm of its
  concatenated gradient, sqrt(Σ_policies ‖g‖²), and the mean of its per-policy shares; a
  cosine is only defined between roles or agents on the same policy. `agent/<a>/grad_norm` is
  logged for roles with more than one agent. `policy/<p>/grad_norm` is the norm before
  clipping (after the coherence regulariser).
- Token statistics (entropy, kl, clip_frac) are exact token means over the whole step;
  `role/<r>/pg_loss` is the policy-gradient part of the loss (KL excluded) with the role's
  turns normalised as if they were a batch of their own; `role/<r>/opt_steps` counts the
  optimizer steps (over all policies) that the role's turns took part in. `train/loss` is the
  sequence-weighted mean of the losses each optimizer step minimised. KL figures appear only
  where a KL coefficient is > 0 (the reference forward pass is skipped otherwise).
- `sys/grad_snapshot_mb`: the most memory the gradient snapshots of one optimizer step held
  (trainer/gradients.py), logged when instrumented.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

import torch

from trainer import grad_drill
from trainer.config import Config
from trainer.distributed import SOLO, World
from trainer.episode import Turn
from trainer.gradients import (
    GradientFigures,
    GradientTracker,
    coherence_scales,
    vectors_needed,
)
from trainer.loss import loss_normalizer
from trainer.memory import snapshot_budget_bytes
from trainer.passes import Lane, Stats, run_passes
from trainer.policies import PolicySet
from trainer.sharding import local
from vocabulary.names import (
    AGENT_PREFIX,
    CLIP_FRAC,
    CLIP_FRAC_KEY,
    COHERENCE_COS,
    COHERENCE_SCALE,
    ENTROPY,
    ENTROPY_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    GRAD_SNAPSHOT_KEY,
    KL,
    KL_KEY,
    LOSS_KEY,
    LR,
    OPT_STEPS,
    PG_LOSS,
    RESP_LEN,
    SKIPPED,
    TOKENS,
    agent_key,
    policy_key,
    role_key,
)


def _natural(name: str) -> tuple:
    """generator2 < generator10: digits compare as numbers."""
    return tuple(int(p) if p.isdecimal() else p for p in re.split(r"(\d+)", name))


def segment_order(config: Config) -> Callable[[tuple[str, str]], tuple]:
    """Sort key putting (role, agent) segments in order: role (workflow order), then agent."""
    rank = {role: i for i, role in enumerate(config.roles)}

    def key(segment: tuple[str, str]) -> tuple:
        role, agent = segment
        return (rank.get(role, len(rank)), role, _natural(agent), agent)

    return key


def segment_key(config: Config) -> Callable[[Turn], tuple]:
    """Sort key putting turns in segment order: role (workflow order), then agent."""
    order = segment_order(config)
    return lambda turn: order((turn.role, turn.agent))


def split_mini_batches(
    turns: list[Turn], n: int, config: Config, *, keep_empty: bool = False
) -> list[list[Turn]]:
    """Stratified split into at most `n` non-empty optimizer batches, each in segment order
    (`keep_empty`: exactly `n`, some maybe empty: a rank's share of the step's batches)."""
    ordered = sorted(turns, key=segment_key(config))
    return [chunk for chunk in (ordered[i::n] for i in range(n)) if chunk or keep_empty]


def batch_normalizer(turns: list[Turn], config: Config) -> float:
    """The loss normaliser of one optimizer batch (trainer/loss.py)."""
    tokens = sum(len(t.completion_ids) for t in turns)
    return loss_normalizer(config.loss_agg, len(turns), tokens, config.max_new_tokens)


def lane(
    name: str,
    turns: list[Turn],
    config: Config,
    *,
    normalizer: float | None = None,
    on_segment: Callable[[str, str], None] | None = None,
    segments: list[tuple[str, str]] | None = None,
    micro_counts: dict[tuple[str, str], int] | None = None,
    loss_scale: float = 1.0,
) -> Lane:
    """`turns` of policy `name` as one optimizer step's lane (trainer/passes.py), in segment
    order. `segments` (data parallel: the segments of every rank's turns) makes it walk
    those, in that order, calling `on_segment` for a segment with no turns here too.
    `normalizer` defaults to that of `turns` as one optimizer batch."""
    turns = sorted(turns, key=segment_key(config))
    if normalizer is None:
        normalizer = batch_normalizer(turns, config)
    by_segment = {k: list(g) for k, g in groupby(turns, key=lambda t: (t.role, t.agent))}
    if segments is None:
        segments = list(by_segment)
    elif missing := set(by_segment) - set(segments):
        raise ValueError(f"turns of segments {sorted(missing)} are not in the plan {segments}")
    return Lane(
        policy=name,
        segments=list(segments),
        turns=by_segment,
        normalizer=normalizer,
        on_segment=on_segment,
        micro_counts=micro_counts,
        loss_scale=loss_scale,
    )


def accumulate_gradients(
    policies: PolicySet, name: str, turns: list[Turn], config: Config, *, pad_id: int, **options
) -> Stats:
    """Forward and backward `turns` on policy `name` alone, adding their gradient to `.grad`
    (`options`: those of `lane`). Returns the summed statistics of `grpo_loss` per role."""
    one = lane(name, turns, config, **options)
    run_passes(policies, [one], config, pad_id)
    return one.stats


@dataclass
class _OpenStep:
    """One policy's optimizer step whose passes are under way."""

    lane: Lane
    tracker: GradientTracker | None
    seqs: float  # every rank's sequences


def _open_step(
    policies: PolicySet,
    name: str,
    turns: list[Turn],
    config: Config,
    track: bool,
    world: World,
    segments: list[tuple[str, str]] | None,
    snapshot_budget: float,
) -> _OpenStep:
    """Zero `name`'s gradient and set up its optimizer step's lane and gradient tracker.

    Data parallel: `turns` are this rank's, `segments` those of every rank's turns (the same
    list on every rank); the normaliser is that of every rank's turns and tokens.
    """
    policies.optimizer(name).zero_grad(set_to_none=True)
    if segments is None:
        key = segment_key(config)
        segments = [k for k, _ in groupby(sorted(turns, key=key), key=lambda t: (t.role, t.agent))]
    tracker = _gradient_tracker(policies, name, segments, config, track, world, snapshot_budget)
    seqs, tokens = world.sum_floats(
        [len(turns), sum(len(t.completion_ids) for t in turns)], f"the batch size of {name}"
    )
    normalizer = loss_normalizer(config.loss_agg, int(seqs), int(tokens), config.max_new_tokens)
    one = lane(
        name,
        turns,
        config,
        normalizer=normalizer,
        on_segment=tracker.end_segment if tracker is not None else None,
        segments=segments,
        micro_counts=_micro_counts(turns, segments, config, world, name)
        if policies.sharded
        else None,
        loss_scale=float(world.size) if policies.sharded else 1.0,
    )
    return _OpenStep(one, tracker, seqs)


def _optimizer_steps(
    policies: PolicySet,
    batches: dict[str, list[Turn]],
    config: Config,
    pad_id: int,
    track: bool,
    world: World = SOLO,
    segments: dict[str, list[tuple[str, str]]] | None = None,
) -> list[dict]:
    """One optimizer step of each policy in `batches` (policy -> its optimizer batch), their
    turns sharing passes when there are several; returns what the metrics need, per step."""
    budget = snapshot_budget_bytes() / len(batches)  # their snapshots are held together
    steps = [
        _open_step(policies, name, turns, config, track, world, (segments or {}).get(name), budget)
        for name, turns in batches.items()
    ]
    run_passes(policies, [step.lane for step in steps], config, pad_id)
    return [_finish_step(policies, step, config, track, world) for step in steps]


def _finish_step(
    policies: PolicySet, step: _OpenStep, config: Config, track: bool, world: World
) -> dict:
    """Settle the tracker, clip and step the optimizer; the step's record for the metrics."""
    name, segments = step.lane.policy, step.lane.segments
    params = policies.parameters(name)
    stats = world.sum_stats(step.lane.stats, f"the statistics of {name}")
    roles = {role for role, _ in segments}
    figures, coherence, peak = None, {}, 0
    if step.tracker is not None:
        figures, coherence, peak = _settle_tracker(step.tracker, policies, name, config, world)
        step.tracker = None  # free the vectors before the optimizer allocates its state
    elif world.active and not policies.sharded:
        world.all_sum_grads(params, f"the gradient of {name}")
    if figures is None:
        grad_drill.settle_whole(name, segments, params)

    norm, skipped = _clip_and_step(policies, name, config, world)

    if figures is None and track:
        # Single segment: the whole gradient belongs to that role and agent.
        (role, agent), sq = segments[0], norm**2
        figures = GradientFigures(role_sq={role: sq}, agent_sq={agent: sq})
    loss = sum(s["loss"] for s in stats.values())
    return {
        "policy": name,
        "stats": stats,
        "figures": figures,
        "coherence": coherence,
        "grad_norm": norm,
        "skipped": skipped,
        "loss": loss,
        "seqs": int(step.seqs),
        "roles": roles,
        "peak_bytes": peak,
    }


def _gradient_tracker(
    policies: PolicySet,
    name: str,
    segments: list[tuple[str, str]],
    config: Config,
    track: bool,
    world: World,
    snapshot_budget: float,
) -> GradientTracker | None:
    """The tracker snapshotting `name`'s gradient between segments, or None when neither the
    figures (of more than one segment) nor the coherence regulariser need one."""
    # One segment needs no snapshots: its role and agent gradient is the whole gradient.
    if not ((track and len(segments) > 1) or config.coherence_lambda > 0):
        return None
    params = policies.parameters(name)
    roles = {role for role, _ in segments}
    max_agents = max(sum(1 for r, _ in segments if r == role) for role in roles)
    numel = sum(local(p).numel() for p in params)
    needed = vectors_needed(len(roles), max_agents) * numel * 4
    offload = config.grad_snapshots == "host" or needed > snapshot_budget
    reduce = sum_dots = None
    if policies.sharded:  # .grad holds the summed gradient's shard: sum dot products
        sum_dots = lambda v: world.sum_floats(v, f"dot products of {name}")  # noqa: E731
    elif world.active:
        reduce = lambda v: world.all_sum_(v, f"the gradient of a segment of {name}")  # noqa: E731
    return GradientTracker(params, offload=offload, reduce=reduce, sum_dots=sum_dots)


def _settle_tracker(
    tracker: GradientTracker, policies: PolicySet, name: str, config: Config, world: World
) -> tuple[GradientFigures, dict, int]:
    """The tracked figures, the coherence scales (applied to `.grad`) and the snapshots' peak
    memory; the episodes' gradient shares settle against the role vectors."""
    figures = tracker.finish()
    grad_drill.settle(name, tracker.roles)  # the episodes' shares of the role vectors
    coherence = {}
    if config.coherence_lambda > 0:
        coherence = coherence_scales(
            tracker.roles,
            policies.coherence,
            name,
            config.coherence_lambda,
            config.coherence_ema,
        )
    # Data parallel, .grad holds this rank's gradient and the role vectors every rank's:
    # write them back even when every scale is 1.
    scales = {role: scale for role, (scale, _) in coherence.items()}
    tracker.write_back(scales, force=world.active and not policies.sharded)
    return figures, coherence, tracker.peak_bytes


def _clip_and_step(
    policies: PolicySet, name: str, config: Config, world: World
) -> tuple[float, bool]:
    """Clip `name`'s gradient and step its optimizer unless the gradient is not finite;
    returns the norm before clipping and whether the step was skipped."""
    params = policies.parameters(name)
    optimizer = policies.optimizer(name)
    grads = [p.grad for p in params if p.grad is not None]
    if policies.sharded:
        total, norm = _sharded_clip(grads, config.grad_clip, world, name)
    else:
        total = torch.nn.utils.get_total_norm(grads) if grads else None
        norm = float(total) if total is not None else 0.0
    skipped = not math.isfinite(norm)
    if not skipped:
        if config.grad_clip > 0 and total is not None and not policies.sharded:
            torch.nn.utils.clip_grads_with_norm_(params, config.grad_clip, total)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm, skipped


def _micro_counts(
    turns: list[Turn], segments: list[tuple[str, str]], config: Config, world: World, name: str
) -> dict[tuple[str, str], int]:
    """Each segment's largest micro-batch count over the ranks (sharded policies run that many
    forward and backward passes on every rank)."""
    mine: dict[tuple[str, str], list[Turn]] = defaultdict(list)
    for turn in sorted(turns, key=segment_key(config)):
        mine[(turn.role, turn.agent)].append(turn)
    size, tokens = config.micro_batch_size, config.token_budget
    counts = [grad_drill.micro_batch_count(mine[s], size, tokens) for s in segments]
    everyone = world.gather(counts, f"the micro-batch counts of {name}")
    return {s: max(c[i] for c in everyone) for i, s in enumerate(segments)}


def _sharded_clip(
    grads: list[torch.Tensor], clip: float, world: World, name: str
) -> tuple[torch.Tensor | None, float]:
    """The norm of a sharded gradient (squares summed over ranks), and clipping to `clip` as
    `clip_grads_with_norm_` does (every rank scales its shard by the same factor)."""
    if not grads:
        return None, 0.0
    squares = float(sum(local(g).double().pow(2).sum() for g in grads))
    (squares,) = world.sum_floats([squares], f"the gradient norm of {name}")
    norm = math.sqrt(squares) if math.isfinite(squares) else math.nan
    total = torch.tensor(norm, dtype=torch.float32)
    if clip > 0 and math.isfinite(norm):
        coef = torch.clamp(clip / (total + 1e-6), max=1.0)
        for g in grads:
            local(g).mul_(coef.to(local(g).device))
    return total, norm


def update_policies(
    policies: PolicySet,
    turns: list[Turn],
    config: Config,
    *,
    tokenizer_pad_id: int,
    instrument: bool = True,
    world: World = SOLO,
) -> dict[str, float]:
    """Update every policy that has turns; return the step's metrics (module docstring).

    Data parallel (`world` of several ranks): `turns` are this rank's; every rank walks the
    plan of policies, optimizer batches and segments of all ranks' turns (`update_plan`).
    """
    by_policy: dict[str, list[Turn]] = defaultdict(list)
    for turn in turns:
        if turn.policy not in policies.names:
            raise KeyError(
                f"turn of {turn.agent} routed to unknown policy {turn.policy!r}; "
                f"policies are {', '.join(policies.names)}"
            )
        by_policy[turn.policy].append(turn)

    plan = update_plan(by_policy, policies.names, config, world)
    world.check_same("the update plan (policies, optimizer batches, segments)", plan)
    metrics: dict[str, float] = {
        policy_key(name, LR): float(policies.scheduler(name).get_last_lr()[0]) for name in plan
    }
    mine = {
        name: split_mini_batches(
            by_policy.get(name, []), config.mini_batches, config, keep_empty=world.active
        )
        for name in plan
    }
    # Batched adapters (LoRA, one process): the policies take their k-th optimizer steps
    # together, their turns sharing passes (trainer/passes.py); else one policy at a time.
    together = policies.shares_passes and not world.active
    records: list[tuple[int, dict]] = []  # (mini-batch index, record)
    for k in range(max((len(b) for b in plan.values()), default=0)):
        names = [name for name in plan if k < len(plan[name])]
        for group in [names] if together else [[name] for name in names]:
            batches = {name: mine[name][k] for name in group}
            segments = {name: plan[name][k] for name in group} if world.active else None
            for record in _optimizer_steps(
                policies, batches, config, tokenizer_pad_id, instrument, world, segments
            ):
                records.append((k, record))
    for name in plan:
        policies.scheduler(name).step()
        norms = [r["grad_norm"] for _, r in records if r["policy"] == name]
        finite = [n for n in norms if math.isfinite(n)]
        metrics[policy_key(name, GRAD_NORM)] = sum(finite) / len(finite) if finite else math.nan
        if skipped := sum(r["skipped"] for _, r in records if r["policy"] == name):
            metrics[policy_key(name, SKIPPED)] = float(skipped)

    metrics.update(_token_metrics(records, config))
    if instrument:
        agents_of: dict[str, set[str]] = defaultdict(set)
        for batch_segments in plan.values():
            for segments in batch_segments:
                for role, agent in segments:
                    agents_of[role].add(agent)
        metrics.update(_gradient_metrics(records, agents_of))
        peak = max((r["peak_bytes"] for _, r in records), default=0)
        metrics[GRAD_SNAPSHOT_KEY] = peak / 2**20
    metrics.update(_coherence_metrics(records))
    return metrics


def update_plan(
    by_policy: dict[str, list[Turn]], names: list[str], config: Config, world: World = SOLO
) -> dict[str, list[list[tuple[str, str]]]]:
    """policy -> its optimizer batches -> their (role, agent) segments, in segment order, over
    every rank's turns: what every rank walks (a policy with no turns anywhere is left out).

    Data parallel, optimizer batch k is the union of every rank's k-th stratified share of its
    own turns (with `mini_batches` 1: all the step's turns, as in one process).
    """
    order = segment_order(config)
    local = {
        name: [
            sorted({(t.role, t.agent) for t in batch}, key=order)
            for batch in split_mini_batches(turns, config.mini_batches, config)
        ]
        for name, turns in by_policy.items()
        if turns
    }
    plan: dict[str, list[list[tuple[str, str]]]] = {}
    everyone = world.gather(local, "the update plan")
    for name in names:
        batches = [theirs.get(name, []) for theirs in everyone]
        count = max(len(b) for b in batches)
        if count:
            plan[name] = [
                sorted({seg for b in batches if k < len(b) for seg in b[k]}, key=order)
                for k in range(count)
            ]
    return plan


def _token_metrics(records: list[tuple[int, dict]], config: Config) -> dict[str, float]:
    totals: Stats = defaultdict(lambda: defaultdict(float))
    opt_steps: dict[str, int] = defaultdict(int)
    for _, record in records:
        for role, stats in record["stats"].items():
            for key, value in stats.items():
                totals[role][key] += value
            opt_steps[role] += 1
    out: dict[str, float] = {}
    grand: dict[str, float] = defaultdict(float)
    for role, t in totals.items():
        tokens = t["tokens"]
        out[role_key(role, TOKENS)] = tokens
        out[role_key(role, RESP_LEN)] = tokens / t["seqs"] if t["seqs"] else 0.0
        out[role_key(role, OPT_STEPS)] = float(opt_steps[role])
        norm = loss_normalizer(config.loss_agg, int(t["seqs"]), int(tokens), config.max_new_tokens)
        out[role_key(role, PG_LOSS)] = t["pg"] / norm
        if tokens:
            out[role_key(role, ENTROPY)] = t["entropy"] / tokens
            out[role_key(role, CLIP_FRAC)] = t["clipped"] / tokens
        if t["kl_tokens"]:
            out[role_key(role, KL)] = t["kl"] / t["kl_tokens"]
        for key in ("tokens", "entropy", "clipped", "kl", "kl_tokens"):
            grand[key] += t[key]
    if grand["tokens"]:
        out[ENTROPY_KEY] = grand["entropy"] / grand["tokens"]
        out[CLIP_FRAC_KEY] = grand["clipped"] / grand["tokens"]
    if grand["kl_tokens"]:
        out[KL_KEY] = grand["kl"] / grand["kl_tokens"]
    seqs = sum(r["seqs"] for _, r in records)
    if seqs:
        out[LOSS_KEY] = sum(r["loss"] * r["seqs"] for _, r in records) / seqs
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _gradient_metrics(
    records: list[tuple[int, dict]], agents_of: dict[str, set[str]]
) -> dict[str, float]:
    """Combine per-(policy, optimizer step) figures into the step's gradient metrics."""
    by_step: dict[int, list[dict]] = defaultdict(list)
    for k, record in records:
        if record["figures"] is not None:
            by_step[k].append(record)
    series: dict[str, list[float]] = defaultdict(list)  # metric -> one value per optimizer step
    for step_records in by_step.values():
        role_sq: dict[str, float] = defaultdict(float)
        shares: dict[str, list[float]] = defaultdict(list)
        for record in step_records:
            figures: GradientFigures = record["figures"]
            for role, sq in figures.role_sq.items():
                role_sq[role] += sq
            for role, share in figures.shares().items():
                shares[role].append(share)
            for agent, sq in figures.agent_sq.items():
                series[agent_key(agent, GRAD_NORM)].append(math.sqrt(sq))
            for key, c in figures.cos.items():
                series[key].append(c)
        for role, sq in role_sq.items():
            series[role_key(role, GRAD_NORM)].append(math.sqrt(sq))
        for role, values in shares.items():
            series[role_key(role, GRAD_SHARE)].append(_mean(values))

    parallel = {a for agents in agents_of.values() if len(agents) > 1 for a in agents}
    out = {}
    for key, values in series.items():
        if key.startswith(AGENT_PREFIX) and key.split("/")[1] not in parallel:
            continue
        out[key] = _mean(values)
    return out


def _coherence_metrics(records: list[tuple[int, dict]]) -> dict[str, float]:
    scales: dict[str, list[float]] = defaultdict(list)
    cosines: dict[str, list[float]] = defaultdict(list)
    for _, record in records:
        for role, (scale, c) in record["coherence"].items():
            scales[role].append(scale)
            if c is not None:
                cosines[role].append(c)
    out = {role_key(r, COHERENCE_SCALE): _mean(v) for r, v in scales.items()}
    out.update({role_key(r, COHERENCE_COS): _mean(v) for r, v in cosines.items()})
    return out
