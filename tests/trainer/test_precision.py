"""fp32 trainable weights and optimizer state over a bf16-loaded Qwen3 (trainer/precision.py).

A real model loads in bf16 on CUDA. These tests load the tiny Qwen3 in bf16 on the CPU, which
exercises the same casting (autocast itself only runs on CUDA)."""

from __future__ import annotations

import io

import pytest
import torch

from tests.trainer.test_update import voting_config, voting_turns
from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer.policies import PolicySet, policy_names
from trainer.precision import autocast, compute_dtype, dtype_bits
from trainer.update import accumulate_gradients


def bf16_policies(finetune: str, sharing: str = "shared") -> PolicySet:
    config = voting_config(finetune=finetune, sharing=sharing, lr=2e-5, kl_beta=0.0)
    return PolicySet(tiny_qwen3().to(torch.bfloat16), config, policy_names(config))


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_trainable_weights_are_fp32_over_a_bf16_model(finetune):
    policies = bf16_policies(finetune)
    for name in policies.names:
        assert {p.dtype for p in policies.parameters(name)} == {torch.float32}


def test_the_frozen_lora_base_keeps_its_bf16_weights():
    policies = bf16_policies("lora")
    frozen = [p for p in policies.model.parameters() if not p.requires_grad]
    assert frozen and {p.dtype for p in frozen} == {torch.bfloat16}


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_one_adamw_step_at_lr_2e_5_changes_every_parameter_with_gradient(finetune):
    policies = bf16_policies(finetune)
    config = policies.config
    name = policies.names[0]
    turns = voting_turns(config)
    optimizer = policies.optimizer(name)
    optimizer.zero_grad(set_to_none=True)
    accumulate_gradients(policies, name, turns, config, pad_id=0)
    params = policies.parameters(name)
    with_grad = [p for p in params if p.grad is not None and bool(p.grad.abs().sum() > 0)]
    assert with_grad  # (LoRA's A gets none on the first step: B starts at zero)
    before = [p.detach().clone() for p in with_grad]
    grads = [p.grad.clone() for p in with_grad]
    optimizer.step()
    # Adam's first step moves every coordinate with a nonzero gradient by about lr; in bf16
    # most of those moves round away.
    stuck = sum(int(((a == p) & (g != 0)).sum()) for a, p, g in zip(before, with_grad, grads))
    moved = sum(int((g != 0).sum()) for g in grads)
    assert stuck == 0, f"{stuck} of {moved} coordinates with a gradient did not move"


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_adamw_state_is_fp32(finetune):
    policies = bf16_policies(finetune)
    name = policies.names[0]
    accumulate_gradients(policies, name, voting_turns(policies.config), policies.config, pad_id=0)
    policies.optimizer(name).step()
    state = policies.optimizer(name).state
    dtypes = {t.dtype for s in state.values() for k, t in s.items() if k != "step"}
    assert dtypes == {torch.float32}


def test_compute_is_bf16_under_cuda_autocast_and_fp32_on_the_cpu():
    assert compute_dtype("cuda") == torch.bfloat16
    assert compute_dtype("cpu") == torch.float32
    assert dtype_bits(compute_dtype("cuda")) == 16.0
    with autocast("cpu"):
        assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_resuming_fp32_policies_over_a_bf16_base_is_exact(finetune):
    def step(policies):
        name = policies.names[0]
        policies.optimizer(name).zero_grad(set_to_none=True)
        accumulate_gradients(
            policies, name, voting_turns(policies.config), policies.config, pad_id=0
        )
        policies.optimizer(name).step()

    original = bf16_policies(finetune)
    step(original)
    saved = io.BytesIO()  # through bytes, as a checkpoint: no tensor shared with `original`
    torch.save(original.state_dict(), saved)
    saved.seek(0)
    resumed = bf16_policies(finetune)
    resumed.load_state_dict(torch.load(saved))
    step(original)
    step(resumed)
    for name in original.names:
        for a, b in zip(original.parameters(name), resumed.parameters(name)):
            assert a.dtype == b.dtype == torch.float32
            assert torch.equal(a, b)
