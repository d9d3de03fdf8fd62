"""`grad_checkpointing` and `grad_snapshots` save memory without changing what a step computes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.trainer.test_update import voting_config, voting_turns
from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer import update
from trainer.config import make_config
from trainer.policies import PolicySet, policy_names
from trainer.update import accumulate_gradients, update_policies

FIGURES = ("grad_norm", "grad_share")


def build(**values) -> PolicySet:
    config = voting_config(**values)
    return PolicySet(tiny_qwen3(), config, policy_names(config))


def gradient_figures(metrics: dict[str, float]) -> dict[str, float]:
    return {
        k: v
        for k, v in metrics.items()
        if k.endswith(FIGURES) or k.startswith("grad_cos/") or k == "train/loss"
    }


def test_auto_checkpointing_is_on_only_where_the_update_would_not_fit_without_it(monkeypatch):
    monkeypatch.delenv("TROUPE_GPU_MEMORY_GB", raising=False)  # the 141 GiB default
    # Paper sequences (512 + 2,048 tokens): 4 a micro-batch of 0.6B need ~23 GiB without it,
    # 32 need ~169 GiB (~66 GiB with it).
    assert not make_config("paper", model="Qwen/Qwen3-0.6B", micro_batch_size=4).checkpointing
    assert make_config("paper", model="Qwen/Qwen3-0.6B", micro_batch_size=32).checkpointing
    monkeypatch.setenv("TROUPE_GPU_MEMORY_GB", "16")  # a smaller GPU asks for it sooner
    assert make_config("paper", model="Qwen/Qwen3-0.6B", micro_batch_size=4).checkpointing
    assert not make_config(model="tiny-s").checkpointing
    assert make_config(model="tiny-s", grad_checkpointing="on").checkpointing
    # (on the CPU: without checkpointing this would not fit one GPU and be refused)
    config = make_config(model="Qwen/Qwen3-4B", grad_checkpointing="off", device="cpu")
    assert not config.checkpointing


def test_the_new_fields_leave_old_config_hashes_unchanged():
    # Hashes of these presets before the fields existed (git a593bd1).
    assert make_config("cpu-demo").hash() == "cdbf7e4c5a063149"
    # The paper preset was 928647c00968a98d until it set rollout_batch=32 (the rollout's KV
    # cache); without that one change it still is.
    paper = make_config("paper")
    assert paper.hash() == "86c82df8188ef1d6"
    whole = dataclasses.replace(paper, rollout_batch=0)  # refused on a GPU, but hashable
    assert whole.hash() == "928647c00968a98d"
    assert make_config("cpu-demo", grad_snapshots="host").hash() != "cdbf7e4c5a063149"


def test_bad_values_name_the_field_and_the_choices():
    with pytest.raises(ValueError, match="grad_snapshots: 'gpu' is not one of device, host"):
        make_config(grad_snapshots="gpu")


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_checkpointing_recomputes_in_train_mode_and_gives_the_same_gradients(finetune):
    plain, checkpointed = (
        build(finetune=finetune, grad_checkpointing=mode) for mode in ("off", "on")
    )
    name = plain.names[0]
    with checkpointed.use(name, train=True) as model:
        assert model.is_gradient_checkpointing
    with plain.use(name, train=True) as model:
        assert not model.is_gradient_checkpointing
    stats = []
    for policies in (plain, checkpointed):
        stats.append(
            accumulate_gradients(
                policies, name, voting_turns(policies.config), policies.config, pad_id=0
            )
        )
    for role in stats[0]:
        assert stats[1][role]["loss"] == pytest.approx(stats[0][role]["loss"], rel=1e-5)
    for a, b in zip(plain.parameters(name), checkpointed.parameters(name)):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("sharing", ["shared", "per_role"])
def test_checkpointing_keeps_the_per_role_figures(sharing):
    figures = []
    for mode in ("off", "on"):
        policies = build(sharing=sharing, grad_checkpointing=mode)
        metrics = update_policies(
            policies, voting_turns(policies.config), policies.config, tokenizer_pad_id=0
        )
        figures.append(gradient_figures(metrics))
    assert figures[0].keys() == figures[1].keys()
    assert any(k.startswith("grad_cos/") for k in figures[0])
    for key, value in figures[0].items():
        assert figures[1][key] == pytest.approx(value, rel=1e-4, abs=1e-7), key


def test_host_snapshots_are_asked_for_and_give_the_same_figures(monkeypatch):
    offloads = []
    tracker = update.GradientTracker

    def recording(params, *, offload=False, **more):
        offloads.append(offload)
        return tracker(params, offload=offload, **more)

    monkeypatch.setattr(update, "GradientTracker", recording)
    figures = []
    for where in ("device", "host"):
        policies = build(grad_snapshots=where)
        metrics = update_policies(
            policies, voting_turns(policies.config), policies.config, tokenizer_pad_id=0
        )
        figures.append(gradient_figures(metrics))
    assert offloads == [False, True]
    assert figures[0] == figures[1]
