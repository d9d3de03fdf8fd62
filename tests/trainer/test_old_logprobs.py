"""Turns another engine (vLLM) sampled: the trainer's own π_old and TRL's truncated IS.

No vLLM needed: the "engine's" log-probs are the exact sampler's, shifted, so the expected
weights min(exp(logπ_old − logπ_engine), cap) are known exactly.
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer import loss
from trainer.config import make_config
from trainer.engines.old_logprobs import recompute_old_logprobs
from trainer.episode import Turn
from trainer.head_logprobs import head_logprobs as fused_path
from trainer.loss import grpo_loss, make_batch
from trainer.policies import PolicySet
from trainer.sampling import generate


def _setup(cap: float = 3.0, **values):
    config = make_config("cpu-demo", is_cap=cap, micro_batch_size=2, **values)
    policies = PolicySet(tiny_qwen3(seed=1), config, ["shared"])
    prompts = [[1, 5, 9], [1, 7], [1, 3, 4, 8]]
    with policies.use("shared") as model:
        samples = generate(
            model,
            prompts,
            seeds=[1, 2, 3],
            max_new_tokens=[5, 3, 4],
            temperature=config.temperature,
            eos_ids=[2],
            pad_id=0,
        )
    return config, policies, samples


def _turn(sample, shift: float) -> Turn:
    return Turn(
        role="generator",
        agent="generator",
        policy="shared",
        stage=0,
        prompt_ids=sample.prompt_ids,
        completion_ids=sample.completion_ids,
        logprobs=[lp - shift for lp in sample.logprobs],  # the engine's, off by `shift`
    )


@pytest.mark.parametrize("fused", [False, True])
def test_recomputed_logprobs_are_the_trainers_and_the_weights_are_truncated(fused, monkeypatch):
    config, policies, samples = _setup(cap=3.0, fused_logprobs=fused)
    shifts = [0.5, 2.0, -0.25]  # exp(2.0) = 7.4 > cap: truncated to 3
    turns = [_turn(s, shift) for s, shift in zip(samples, shifts)]
    heads = []  # the fused path's calls: the recompute takes the update's own path

    def counted(*args, **kwargs):
        heads.append(1)
        return fused_path(*args, **kwargs)

    monkeypatch.setattr(loss, "head_logprobs", counted)
    stats = recompute_old_logprobs(policies, turns, config, pad_id=0)
    assert bool(heads) == fused
    for turn, sample, shift in zip(turns, samples, shifts):
        assert turn.logprobs == pytest.approx(sample.logprobs, abs=1e-5)
        expected = min(math.exp(shift), 3.0)
        assert turn.is_weights == pytest.approx([expected] * len(sample.logprobs), rel=1e-4)
    n = [len(s.completion_ids) for s in samples]
    mean = sum(abs(s) * k for s, k in zip(shifts, n)) / sum(n)
    assert stats["train/rollout_logp_gap"] == pytest.approx(mean, rel=1e-4)
    assert stats["train/rollout_logp_gap_max"] == pytest.approx(2.0, rel=1e-4)


def test_the_loss_weighs_the_policy_gradient_term_only():
    config, policies, samples = _setup()
    turns = [_turn(s, 0.0) for s in samples]
    for turn, adv in zip(turns, (1.0, -1.0, 0.5)):
        turn.advantage = adv
    plain = make_batch(turns, pad_id=0)
    assert plain.is_weights is None  # the exact sampler's turns: no weights at all
    for turn in turns:
        turn.is_weights = [0.5] * len(turn.completion_ids)
    weighted = make_batch(turns, pad_id=0)
    assert weighted.is_weights is not None
    logps = weighted.old_logps.clone()
    args = dict(clip_low=0.2, clip_high=0.28, loss_agg="seq-mean-token-mean", normalizer=3.0)
    base, _ = grpo_loss(logps, plain.old_logps, plain.advantages, plain.completion_mask, **args)
    half, _ = grpo_loss(
        logps,
        weighted.old_logps,
        weighted.advantages,
        weighted.completion_mask,
        is_weights=weighted.is_weights,
        **args,
    )
    assert float(half) == pytest.approx(0.5 * float(base))
    # with a KL term the weight does not touch it (TRL adds β·KL after weighting)
    ref = logps - 0.1
    beta = torch.full((3,), 0.2)
    kl_plain, s1 = grpo_loss(
        logps,
        plain.old_logps,
        plain.advantages,
        plain.completion_mask,
        ref_logps=ref,
        kl_beta=beta,
        **args,
    )
    kl_half, s2 = grpo_loss(
        logps,
        weighted.old_logps,
        weighted.advantages,
        weighted.completion_mask,
        ref_logps=ref,
        kl_beta=beta,
        is_weights=weighted.is_weights,
        **args,
    )
    assert s1["kl"] == pytest.approx(s2["kl"])
    assert float(kl_half) == pytest.approx(float(kl_plain) - 0.5 * float(base))
