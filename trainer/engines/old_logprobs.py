"""The trainer's own old log-probs for turns another engine sampled, and their IS weights.

A turn sampled by vLLM carries vLLM's log-probs, which are not the trainer's (other kernels,
bf16 on a GPU): used as π_old they would make the PPO ratio start away from 1. As TRL and
verl do, the trainer recomputes π_old itself, under no grad, with the very forward pass the
update uses (`trainer/loss.token_logprobs`, fused where the update's are), and keeps the
mismatch as a per-token truncated importance weight min(exp(logπ_old − logπ_engine), cap) that
the loss applies.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from trainer.episode import Turn
from trainer.loss import make_batch, token_logprobs
from vocabulary.names import ROLLOUT_LOGP_GAP_KEY, ROLLOUT_LOGP_GAP_MAX_KEY


@torch.no_grad()
def recompute_old_logprobs(policies, turns: list[Turn], config, pad_id: int) -> dict[str, float]:
    """Replace each turn's `logprobs` by the trainer's and set its `is_weights`; returns the
    gap |logπ_old − logπ_engine| per token, its mean and max over the step."""
    by_policy: dict[str, list[Turn]] = defaultdict(list)
    for turn in turns:
        if turn.completion_ids:
            by_policy[turn.policy].append(turn)
        else:
            turn.is_weights = []
    total, count, worst = 0.0, 0, 0.0
    device = policies.device
    for name, group in by_policy.items():
        with policies.use(name) as model:
            for start in range(0, len(group), config.micro_batch_size):
                micro = group[start : start + config.micro_batch_size]
                batch = make_batch(micro, pad_id, device)
                logps, _ = token_logprobs(
                    model,
                    batch.input_ids,
                    batch.attention_mask,
                    batch.completion_len,
                    config.temperature,
                    with_entropy=False,
                    fused=config.fused_logprobs,
                )
                for row, turn in enumerate(micro):
                    n = len(turn.completion_ids)
                    mine = logps[row, :n].float().cpu()
                    theirs = torch.tensor(turn.logprobs, dtype=torch.float32)
                    delta = mine - theirs
                    turn.is_weights = torch.exp(delta).clamp(max=config.is_cap).tolist()
                    turn.logprobs = mine.tolist()
                    gap = delta.abs()
                    total += float(gap.sum())
                    count += n
                    worst = max(worst, float(gap.max()))
    return {
        ROLLOUT_LOGP_GAP_KEY: total / count if count else 0.0,
        ROLLOUT_LOGP_GAP_MAX_KEY: worst,
    }
