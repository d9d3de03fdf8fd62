"""The GRPO loss per token, and the forward pass that produces its log-probs.

Maths as TRL's `GRPOTrainer._compute_loss` (checked against it in
tests/trainer/test_grpo_matches_trl.py): token ratio r = exp(logπ − logπ_old), clipped
surrogate −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A), plus β·r·KL with the k3 estimator
KL = exp(ref − logπ) − (ref − logπ) − 1. The factor r (TRL 1.16's default
`use_bias_correction_kl`, from DeepSeek-V3.2) accounts for the tokens having been sampled from
π_old: it makes the KL gradient the unbiased reverse-KL gradient. Logits are divided by the
sampling temperature before the log-softmax, as TRL does. `loss_agg` ↔ TRL `loss_type`:

    seq-mean-token-mean      grpo     Σ_seq mean_tok(ℓ) / N_seq
    token-mean               bnpo     Σ_seq Σ_tok ℓ / N_tok   (= dapo over a whole batch)
    seq-mean-token-sum       luspo    Σ_seq Σ_tok ℓ / N_seq   (with token-level ratios)
    seq-mean-token-sum-norm  dr_grpo  Σ_seq Σ_tok ℓ / (N_seq · max_completion_length)

Unlike TRL, the loss of a micro-batch is a SUM of per-sequence contributions divided by a
normaliser computed once over the whole optimizer batch of the policy (`loss_normalizer`).
Gradient accumulation over any split into micro-batches — and over the role/agent segments of
`trainer/gradients.py` — then gives exactly the full-batch gradient, and each segment's share
of it is well defined.

Rollouts sampled by another engine (`rollout_engine: vllm`): `old_logps` are the trainer's
own recomputed log-probs, and the policy-gradient term of each token is multiplied by its
truncated importance weight min(π_old / π_engine, cap) (TRL's `vllm_importance_sampling_
correction`, token_truncate), before the KL term is added, as TRL does.

Batch layout: prompts left-padded, completions right-padded, so every completion starts at the
same column and only the last T+1 positions need logits (`logits_to_keep`). Position ids are
derived from the attention mask, so a padded row computes the same numbers as the bare row.

Packed layout (`micro_batch_tokens` > 0; `make_packed_batch`): (almost) no padding, as TRL's
`padding_free` and verl's remove-padding do. The turns are laid end to end in rows as long as
the pass's longest turn, position ids restart at 0 with each turn, and the attention mask is
left out: transformers reads the restarts and keeps each turn's attention within itself. SDPA
and eager attention do that with a dense block-causal mask over the whole row, so a row's
attention costs its length squared: one row of the whole budget cost 0.54-0.63x the padded
path's speed on the CPU (BENCHMARKS.md), rows no longer than the longest turn never cost more
attention, rows or padding than the padded layout of the same turns. Only the rows' ends are
padded, with positions that continue the last turn, so no real token attends to them. Only the
logits that predict a completion token are computed (`logits_to_keep` as a boolean mask); the
log-probs are scattered back into the padded (B, T) layout, so the loss and its statistics are
the padded path's, with the same numbers up to the kernels' rounding
(tests/trainer/test_packing.py states the tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from trl.trainer.utils import entropy_from_logits, pad, selective_log_softmax

from trainer.config import LOSS_AGG
from trainer.episode import Turn
from trainer.head_logprobs import decoder_and_head, head_logprobs


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, P+T) left-padded prompt | right-padded completion
    attention_mask: torch.Tensor  # (B, P+T)
    completion_mask: torch.Tensor  # (B, T) 1 on real completion tokens
    old_logps: torch.Tensor  # (B, T) sampling log-probs (0 on padding)
    advantages: torch.Tensor  # (B,)
    is_weights: torch.Tensor | None = None  # (B, T) truncated IS weights (1 on padding)

    @property
    def completion_len(self) -> int:
        return self.completion_mask.shape[1]


@dataclass
class PackedBatch(Batch):
    """A `Batch` whose sequences are packed end to end into rows: `input_ids` and
    `position_ids` (R, W), `attention_mask` None; `keep_mask` (R, W) the positions whose
    logits predict completion tokens and `keep` (K,) the same positions in the flattened rows;
    `slots` (K,) where each log-prob lands in the flattened (B, T) layout; `starts` (B,) where
    each turn starts in the flattened rows."""

    position_ids: torch.Tensor | None = None
    keep_mask: torch.Tensor | None = None
    keep: torch.Tensor | None = None
    slots: torch.Tensor | None = None
    starts: list[int] | None = None


def _rows(lengths: list[int], row_tokens: int) -> list[list[int]]:
    """Turn indices by row, in order: a new row where the next turn would pass `row_tokens`."""
    rows: list[list[int]] = [[]]
    used = 0
    for i, length in enumerate(lengths):
        if rows[-1] and used + length > row_tokens:
            rows.append([])
            used = 0
        rows[-1].append(i)
        used += length
    return rows


class PackedSize:
    """The tokens of `make_packed_batch`'s default layout (rows as long as the longest turn),
    turns added one at a time: what a token budget counts, the rows' padded ends included, so
    a pass never holds more tokens than its budget (the memory estimate assumes it)."""

    def __init__(self) -> None:
        self.lengths: list[int] = []
        self.rows = self.width = self.used = 0  # `used`: the last row's tokens

    def tokens_with(self, length: int) -> int:
        """The batch's tokens were a turn of `length` tokens added."""
        if length > self.width:  # a wider row: lay every turn out again
            return len(_rows([*self.lengths, length], length)) * length
        rows = self.rows + (self.used + length > self.width or not self.rows)
        return rows * self.width

    def add(self, length: int) -> None:
        self.lengths.append(length)
        if length > self.width:
            self.width = length
            rows = _rows(self.lengths, length)
            self.rows, self.used = len(rows), sum(self.lengths[i] for i in rows[-1])
        elif self.used + length > self.width:
            self.rows, self.used = self.rows + 1, length
        else:
            self.used += length


def make_packed_batch(
    turns: list[Turn],
    pad_id: int,
    device: torch.device | str = "cpu",
    row_tokens: int | None = None,
) -> PackedBatch:
    """Collate turns end to end in rows of at most `row_tokens` tokens, by default the
    longest turn's length (the module docstring's packed layout); the per-token tensors of the
    loss keep the padded (B, T) shape."""
    padded = make_batch(turns, pad_id)  # the (B, T) tensors of the loss (host-side, small)
    width = padded.completion_len
    if row_tokens is None:
        row_tokens = max(len(t.prompt_ids) + len(t.completion_ids) for t in turns)
    rows = _rows([len(t.prompt_ids) + len(t.completion_ids) for t in turns], row_tokens)
    length = max(
        sum(len(turns[i].prompt_ids) + len(turns[i].completion_ids) for i in r) for r in rows
    )
    ids = [[pad_id] * length for _ in rows]
    positions = [list(range(length)) for _ in rows]
    keep_mask = [[False] * length for _ in rows]
    keep: list[int] = []
    slots: list[int] = []
    starts = [0] * len(turns)
    for r, row in enumerate(rows):
        at = 0
        for i in row:
            t = turns[i]
            prompt, completion = len(t.prompt_ids), len(t.completion_ids)
            if completion and not prompt:
                raise ValueError(f"turn of {t.agent}: a completion needs a prompt token before it")
            starts[i] = r * length + at
            first = at + prompt - 1  # the logit there predicts the first completion token
            for j in range(first, first + completion):
                keep_mask[r][j] = True
            keep.extend(range(r * length + first, r * length + first + completion))
            slots.extend(range(i * width, i * width + completion))
            ids[r][at : at + prompt + completion] = [*t.prompt_ids, *t.completion_ids]
            positions[r][at : at + prompt + completion] = range(prompt + completion)
            at += prompt + completion
        # The padded end continues the last turn's positions: part of it, after it (causal).
        last = positions[r][at - 1] if at else -1
        positions[r][at:] = range(last + 1, last + 1 + length - at)
    long = dict(dtype=torch.long, device=device)
    return PackedBatch(
        input_ids=torch.tensor(ids, **long),
        attention_mask=None,
        completion_mask=padded.completion_mask.to(device),
        old_logps=padded.old_logps.to(device),
        advantages=padded.advantages.to(device),
        is_weights=None if padded.is_weights is None else padded.is_weights.to(device),
        position_ids=torch.tensor(positions, **long),
        keep_mask=torch.tensor(keep_mask, dtype=torch.bool, device=device),
        keep=torch.tensor(keep, **long),
        slots=torch.tensor(slots, **long),
        starts=starts,
    )


def batch_logprobs(
    model: nn.Module,
    batch: Batch,
    temperature: float,
    *,
    with_entropy: bool = True,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` of a padded or a packed batch: (B, T) log-probs and entropies.
    `fused`: without the whole vocabulary's logits (trainer/head_logprobs.py)."""
    if not isinstance(batch, PackedBatch):
        return token_logprobs(
            model,
            batch.input_ids,
            batch.attention_mask,
            batch.completion_len,
            temperature,
            with_entropy=with_entropy,
            fused=fused,
        )
    targets = batch.input_ids.reshape(-1)[batch.keep + 1]  # (K,)
    shape = batch.completion_mask.shape
    inputs = dict(input_ids=batch.input_ids, position_ids=batch.position_ids, use_cache=False)
    if fused:
        decoder, head = decoder_and_head(model)
        hidden = decoder(**inputs).last_hidden_state
        hidden = hidden.reshape(-1, hidden.shape[-1])[batch.keep]  # (K, H)
        selected, entropy = head_logprobs(
            head, hidden, targets, temperature, with_entropy=with_entropy
        )
    else:
        logits = model(**inputs, logits_to_keep=batch.keep_mask).logits  # kept, row by row
        logits = logits.reshape(-1, logits.shape[-1]) / temperature  # (K, V)
        # As one row: TRL's fp32 path loops over the leading dimension (one logsumexp a row),
        # so (K, V) would cost a kernel per token.
        selected = selective_log_softmax(logits.unsqueeze(0), targets.unsqueeze(0))[0]  # (K,)
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = entropy_from_logits(logits)
    entropies = None if entropy is None else _scattered(entropy, batch.slots, shape)
    return _scattered(selected, batch.slots, shape), entropies


def _scattered(values: torch.Tensor, slots: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """(K,) values placed at `slots` of a zero (B, T) tensor (differentiable in `values`)."""
    flat = torch.zeros(shape.numel(), dtype=values.dtype, device=values.device)
    return flat.scatter(0, slots, values).view(shape)


def make_batch(turns: list[Turn], pad_id: int, device: torch.device | str = "cpu") -> Batch:
    """Collate turns into padded tensors (see the module docstring for the layout)."""
    for t in turns:
        if len(t.logprobs) != len(t.completion_ids):
            raise ValueError(
                f"turn of {t.agent}: {len(t.logprobs)} logprobs for {len(t.completion_ids)} tokens"
            )
    long = dict(dtype=torch.long)
    prompts = [torch.tensor(t.prompt_ids, **long) for t in turns]
    completions = [torch.tensor(t.completion_ids, **long) for t in turns]
    prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left")  # (B, P)
    prompt_mask = pad([torch.ones_like(p) for p in prompts], 0, padding_side="left")  # (B, P)
    completion_ids = pad(completions, padding_value=pad_id, padding_side="right")  # (B, T)
    completion_mask = pad([torch.ones_like(c) for c in completions], 0, padding_side="right")
    old = pad([torch.tensor(t.logprobs, dtype=torch.float32) for t in turns], 0.0, "right")
    is_weights = None
    if any(t.is_weights is not None for t in turns):
        rows = [
            torch.tensor(
                t.is_weights if t.is_weights is not None else [1.0] * len(t.completion_ids),
                dtype=torch.float32,
            )
            for t in turns
        ]
        is_weights = pad(rows, 1.0, "right").to(device)
    return Batch(
        input_ids=torch.cat([prompt_ids, completion_ids], dim=1).to(device),
        attention_mask=torch.cat([prompt_mask, completion_mask], dim=1).to(device),
        completion_mask=completion_mask.to(device),
        old_logps=old.to(device),
        advantages=torch.tensor([t.advantage for t in turns], dtype=torch.float32).to(device),
        is_weights=is_weights,
    )


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,  # (B, L)
    attention_mask: torch.Tensor,  # (B, L)
    completion_len: int,
    temperature: float,
    *,
    with_entropy: bool = True,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (with grad) and entropies (without) of the last `completion_len` tokens.

    Returns (logps, entropies), each (B, T) with T = completion_len; entropies is None when not
    asked for. The entropy is a statistic only, so it costs no activation memory. `fused`:
    without the whole vocabulary's logits (trainer/head_logprobs.py).
    """
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, L)
    inputs = dict(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False
    )
    targets = input_ids[:, -completion_len:]  # (B, T)
    if fused:
        decoder, head = decoder_and_head(model)
        # The hidden state before each completion token predicts it.
        hidden = decoder(**inputs).last_hidden_state[:, -completion_len - 1 : -1, :]  # (B, T, H)
        return head_logprobs(head, hidden, targets, temperature, with_entropy=with_entropy)
    # T+1 logits: the one before the first completion token predicts it; the last predicts
    # nothing and is dropped.
    logits = model(**inputs, logits_to_keep=completion_len + 1).logits[:, :-1, :]  # (B, T, V)
    logits = logits / temperature
    logps = selective_log_softmax(logits, targets)  # (B, T)
    entropies = None
    if with_entropy:
        with torch.no_grad():
            entropies = entropy_from_logits(logits)  # (B, T)
    return logps, entropies


def loss_normalizer(loss_agg: str, n_seqs: int, n_tokens: int, max_completion_length: int) -> float:
    """The constant a batch's summed contributions are divided by (see module docstring)."""
    if loss_agg == "seq-mean-token-mean" or loss_agg == "seq-mean-token-sum":
        return float(max(1, n_seqs))
    if loss_agg == "token-mean":
        return float(max(1, n_tokens))
    if loss_agg == "seq-mean-token-sum-norm":
        return float(max(1, n_seqs) * max_completion_length)
    raise ValueError(f"loss_agg must be one of {', '.join(LOSS_AGG)}, not {loss_agg!r}")


def sequence_contributions(
    per_token: torch.Tensor,  # (B, T)
    mask: torch.Tensor,  # (B, T)
    loss_agg: str,
) -> torch.Tensor:
    """Each sequence's additive share of the batch loss before normalisation: (B,)."""
    summed = (per_token * mask).sum(-1)  # (B,)
    if loss_agg == "seq-mean-token-mean":
        return summed / mask.sum(-1).clamp(min=1.0)
    return summed


def grpo_loss(
    logps: torch.Tensor,  # (B, T) under the policy being trained
    old_logps: torch.Tensor,  # (B, T) sampling policy
    advantages: torch.Tensor,  # (B,)
    mask: torch.Tensor,  # (B, T)
    *,
    clip_low: float,
    clip_high: float,
    loss_agg: str,
    normalizer: float,
    ref_logps: torch.Tensor | None = None,  # (B, T) reference policy, needed when kl_beta > 0
    kl_beta: torch.Tensor | None = None,  # (B,) per-sequence KL coefficient
    entropies: torch.Tensor | None = None,  # (B, T) for the statistics only
    is_weights: torch.Tensor | None = None,  # (B, T) truncated IS weights (another engine)
) -> tuple[torch.Tensor, dict[str, float]]:
    """Loss = Σ_seq contribution / normalizer; stats are detached SUMS (divide by the counts).

    stats: seqs, tokens, loss (this batch's loss value), pg (Σ policy-gradient contributions,
    KL excluded), kl (Σ per-token KL as it enters the loss, only if ref_logps given), clipped
    (Σ tokens in the clipped region, TRL's definition), entropy (Σ per-token entropy, if given).
    """
    mask = mask.to(logps.dtype)
    adv = advantages.unsqueeze(1)  # (B, 1)
    ratio = torch.exp(logps - old_logps)  # (B, T)
    clipped_ratio = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)  # (B, T)
    pg = -torch.min(ratio * adv, clipped_ratio * adv)  # (B, T)
    if is_weights is not None:
        pg = pg * is_weights.to(pg.dtype)
    per_token = pg
    kl = None
    if ref_logps is not None:
        delta = ref_logps - logps  # (B, T)
        # k3 estimator (>= 0), weighted by the (differentiable) ratio: the tokens were sampled
        # from π_old, not π, and the weight makes the KL gradient the unbiased reverse-KL
        # gradient (TRL's default).
        kl = (torch.exp(delta) - delta - 1) * ratio  # (B, T)
        if kl_beta is not None:
            per_token = pg + kl_beta.to(pg.dtype).unsqueeze(1) * kl
    loss = sequence_contributions(per_token, mask, loss_agg).sum() / normalizer

    with torch.no_grad():
        is_clipped = ((ratio < 1 - clip_low) & (adv < 0)) | ((ratio > 1 + clip_high) & (adv > 0))
        stats = {
            "seqs": float(mask.shape[0]),
            "tokens": float(mask.sum()),
            "loss": float(loss),
            "pg": float(sequence_contributions(pg, mask, loss_agg).sum()),
            "clipped": float((is_clipped.to(mask.dtype) * mask).sum()),
        }
        if kl is not None:
            stats["kl"] = float((kl * mask).sum())
        if entropies is not None:
            stats["entropy"] = float((entropies * mask).sum())
    return loss, stats
