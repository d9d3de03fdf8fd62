"""LoRA policies sharing passes (trainer/joint_lora.py, trainer/passes.py) give what a pass per
policy gives: the same log-probs, gradients, per-role figures and weights, in fewer passes.

The reference is the same update without `batch_adapters`, which runs one policy at a time
(the path every other update test exercises against per-role recomputation). The two differ
only in which rows share a matmul of the frozen base, so they agree to float rounding.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import pytest
import torch

from tests.trainer.test_gradients_exact import flat_grad, make_turns
from tests.trainer.voting_setup import PAD, assert_same_update, build, voting_config
from trainer import passes
from trainer.loss import batch_logprobs, make_batch, make_packed_batch
from trainer.update import lane, update_policies


def _count_passes(monkeypatch) -> list[int]:
    """Record the number of parts (policies) in each pass of the update."""
    seen: list[int] = []
    real = passes._backward

    def counting(policies, parts, config, pad_id):
        seen.append(len(parts))
        return real(policies, parts, config, pad_id)

    monkeypatch.setattr(passes, "_backward", counting)
    return seen


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _on(device: str, config):
    """`build`'s policies and `make_turns`' turns for them, the policies then moved to
    `device` (on CUDA the passes run under bf16 autocast)."""
    policies = build(config)
    turns = make_turns(config, policies)
    policies.model.to(device)
    return policies, turns


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("packed", [False, True])
def test_a_routed_pass_computes_each_adapters_own_logprobs_and_gradients(packed, device):
    config = voting_config(
        sharing="per_role", batch_adapters=True, micro_batch_tokens=400 if packed else 0
    )
    # Packed: rows of at most 40 tokens, so the policies' spans cross rows and padded ends.
    collate = partial(make_packed_batch, row_tokens=40) if packed else make_batch
    policies, turns = _on(device, config)
    tol = 1e-5 if device == "cpu" else 3e-2  # bf16: rows batched differently round differently
    assert policies.shares_passes
    turns = sorted(turns, key=lambda t: t.policy)
    names = sorted({t.policy for t in turns})

    alone, grads = [], {}
    for name in names:
        mine = [t for t in turns if t.policy == name]
        alone_batch = collate(mine, PAD, device=device)
        with policies.use(name, train=True) as model:
            logps, _ = batch_logprobs(model, alone_batch, 1.0)
            (logps * alone_batch.completion_mask).sum().backward()
        alone.append(logps.detach())
        grads[name] = flat_grad(policies.parameters(name)).clone()
        policies.optimizer(name).zero_grad(set_to_none=True)

    batch = collate(turns, PAD, device=device)
    width = batch.input_ids.shape[1]
    starts = batch.starts if packed else [i * width for i in range(len(turns))]
    firsts = [next(i for i, t in enumerate(turns) if t.policy == name) for name in names]
    bounds = [starts[i] for i in firsts] + [batch.input_ids.numel()]
    spans = list(zip(names, bounds, bounds[1:]))
    with policies.use_many(spans) as model:
        logps, _ = batch_logprobs(model, batch, 1.0)
        (logps * batch.completion_mask).sum().backward()

    rows = 0
    for name, want in zip(names, alone):
        got = logps.detach()[rows : rows + want.shape[0], : want.shape[1]]
        rows += want.shape[0]
        mask = batch.completion_mask[rows - want.shape[0] : rows, : want.shape[1]].bool()
        assert torch.allclose(got[mask], want[mask], atol=tol), name
        got_grad = flat_grad(policies.parameters(name))
        assert torch.allclose(got_grad, grads[name], atol=tol * grads[name].abs().max()), name


@pytest.mark.parametrize(
    "sharing, options",
    [
        ("per_role", dict(micro_batch_size=6)),
        ("per_role", dict(micro_batch_size=16, kl_beta=0.0)),
        ("per_role", dict(micro_batch_tokens=60, mini_batches=2)),
        ("per_role", dict(micro_batch_size=6, grad_checkpointing="on", coherence_lambda=0.5)),
        ("per_agent", dict(micro_batch_size=6)),
    ],
)
def test_an_update_sharing_passes_equals_one_policy_at_a_time(monkeypatch, sharing, options):
    config = voting_config(sharing=sharing, batch_adapters=True, **options)
    joint, apart = build(config), build(dataclasses.replace(config, batch_adapters=False))
    assert joint.shares_passes and not apart.shares_passes
    turns_j, turns_a = make_turns(config, joint), make_turns(config, apart)

    seen = _count_passes(monkeypatch)
    got = update_policies(joint, turns_j, config, tokenizer_pad_id=PAD)
    joint_passes = list(seen)
    seen.clear()
    want = update_policies(apart, turns_a, config, tokenizer_pad_id=PAD)

    assert max(joint_passes) > 1 and max(seen) == 1  # policies did share passes
    assert len(joint_passes) < len(seen)
    assert_same_update(got, want, joint, apart)


def test_lora_on_the_output_head_runs_one_policy_at_a_time():
    config = voting_config(
        sharing="per_role", batch_adapters=True, lora_targets="q_proj,v_proj,lm_head"
    )
    policies = build(config)
    assert not policies.shares_passes  # the head sees only the kept positions' hidden states
    metrics = update_policies(policies, make_turns(config, policies), config, tokenizer_pad_id=PAD)
    assert metrics["role/generator/grad_norm"] > 0


def test_full_fine_tuning_never_shares_passes():
    config = voting_config(sharing="per_role", finetune="full", batch_adapters=True)
    policies = build(config)
    assert not policies.shares_passes
    lanes = [lane(name, [], config) for name in policies.names]
    with pytest.raises(ValueError, match="share passes"):
        passes.run_passes(policies, lanes, config, PAD)
