"""Smoke tests of `update_policies`: every policy with signal moves, every metric is there."""

from __future__ import annotations

import math

import pytest
import torch

from tests.trainer.tiny_qwen3 import tiny_qwen3
from tests.trainer.voting_setup import AGENTS, PAD, random_turn, voting_config
from trainer.episode import Turn
from trainer.policies import PolicySet, policy_names
from trainer.update import update_policies


def voting_turns(config, seed: int = 0) -> list[Turn]:
    """4 rollouts of Voting; advantages alternate −1, +1 so every policy gets a signal."""
    gen = torch.Generator().manual_seed(seed)
    turns = []
    for sample in range(4):
        for agent, role in AGENTS:
            turn = random_turn(config, agent, role, gen)
            turn.logprobs = [-4.0] * len(turn.completion_ids)
            turn.advantage = 1.0 if sample % 2 else -1.0
            turns.append(turn)
    return turns


def snapshot(policies: PolicySet) -> dict[str, list[torch.Tensor]]:
    return {n: [p.detach().clone() for p in policies.parameters(n)] for n in policies.names}


def changed(before, policies: PolicySet, name: str) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before[name], policies.parameters(name)))


EXPECTED_ROLE_KEYS = (
    "grad_norm",
    "grad_share",
    "entropy",
    "kl",
    "tokens",
    "resp_len",
    "opt_steps",
    "pg_loss",
    "clip_frac",
)


@pytest.mark.parametrize("sharing", ["shared", "per_role", "per_agent"])
def test_every_policy_with_signal_moves_and_every_metric_is_there(sharing):
    config = voting_config(sharing=sharing)
    policies = PolicySet(tiny_qwen3(), config, policy_names(config))
    before = snapshot(policies)
    metrics = update_policies(policies, voting_turns(config), config, tokenizer_pad_id=PAD)

    for name in policies.names:
        assert changed(before, policies, name), f"policy {name} did not move"
        assert metrics[f"policy/{name}/grad_norm"] > 0
        assert metrics[f"policy/{name}/lr"] == pytest.approx(1e-2)
        assert policies.scheduler(name).last_epoch == 1
    for role in ("generator", "aggregator"):
        for key in EXPECTED_ROLE_KEYS:
            assert f"role/{role}/{key}" in metrics, f"role/{role}/{key}"
    for i in range(3):
        assert metrics[f"agent/generator{i}/grad_norm"] > 0
    assert "agent/aggregator/grad_norm" not in metrics  # a role with one agent
    for key in ("train/loss", "train/kl", "train/entropy", "train/clip_frac"):
        assert key in metrics
    assert all(math.isfinite(v) for v in metrics.values())
    cosines = {k for k in metrics if k.startswith("grad_cos/")}
    if sharing == "shared":
        assert "grad_cos/aggregator|generator" in cosines
    if sharing in ("shared", "per_role"):
        assert {"grad_cos/generator0|generator1", "grad_cos/generator1|generator2"} <= cosines
    else:
        assert not cosines  # each agent has a policy of its own
    assert metrics["role/generator/tokens"] == sum(
        len(t.completion_ids) for t in voting_turns(config) if t.role == "generator"
    )


def test_a_policy_without_turns_is_left_alone():
    config = voting_config(sharing="per_role")
    policies = PolicySet(tiny_qwen3(), config, policy_names(config))
    before = snapshot(policies)
    turns = [t for t in voting_turns(config) if t.role == "generator"]
    metrics = update_policies(policies, turns, config, tokenizer_pad_id=PAD)
    assert changed(before, policies, "generator")
    assert not changed(before, policies, "aggregator")
    assert policies.scheduler("aggregator").last_epoch == 0
    assert "policy/aggregator/grad_norm" not in metrics


# Turns whose two mini-batches' role gradients point a little the same way (cos > 0), so the
# regulariser has something to damp (seeds 0–3 give cosines of about −0.02…0).
SEED_AGREEING = 5


def test_full_finetuning_mini_batches_and_coherence_run():
    config = voting_config(
        sharing="shared", finetune="full", mini_batches=2, coherence_lambda=0.5, kl_beta=0.0
    )
    policies = PolicySet(tiny_qwen3(), config, policy_names(config))
    before = snapshot(policies)
    first = update_policies(
        policies, voting_turns(config, SEED_AGREEING), config, tokenizer_pad_id=PAD
    )
    assert changed(before, policies, "shared")
    assert first["role/generator/opt_steps"] == 2
    assert "train/kl" not in first  # no KL coefficient: no reference pass
    # The EMA starts at the first mini-batch's gradient; the second one is scaled against it.
    assert -1.0 <= first["role/generator/coherence_cos"] <= 1.0
    assert set(policies.coherence) == {("shared", "generator"), ("shared", "aggregator")}

    plain_config = voting_config(sharing="shared", finetune="full", mini_batches=2, kl_beta=0.0)
    plain = PolicySet(tiny_qwen3(), plain_config, ["shared"])
    update_policies(plain, voting_turns(config, SEED_AGREEING), plain_config, tokenizer_pad_id=PAD)
    assert first["role/generator/coherence_scale"] < 1.0  # the two mini-batches agree a little
    assert changed(snapshot(plain), policies, "shared")  # so the regulariser changed the step


def test_turns_routed_to_an_unknown_policy_are_rejected():
    config = voting_config(sharing="per_role")
    policies = PolicySet(tiny_qwen3(), config, ["generator"])
    with pytest.raises(KeyError, match="aggregator"):
        update_policies(policies, voting_turns(config), config, tokenizer_pad_id=PAD)


def test_no_kl_coefficient_means_no_reference_forward():
    """At kl_beta 0 a LoRA update never enters the reference (adapters off) and logs no KL;
    a role with its own coefficient still gets its KL."""
    config = voting_config(sharing="per_role", kl_beta=0.0)
    policies = PolicySet(tiny_qwen3(), config, policy_names(config))
    entered = []
    reference = policies.reference

    def counted():
        entered.append(1)
        return reference()

    policies.reference = counted
    metrics = update_policies(policies, voting_turns(config), config, tokenizer_pad_id=PAD)
    assert not entered
    assert not any(key.endswith("/kl") for key in metrics)

    anchored = voting_config(sharing="per_role", kl_beta=0.0, kl_beta_per_role={"aggregator": 0.1})
    policies = PolicySet(tiny_qwen3(), anchored, policy_names(anchored))
    metrics = update_policies(policies, voting_turns(anchored), anchored, tokenizer_pad_id=PAD)
    assert "role/aggregator/kl" in metrics and "train/kl" in metrics
    assert "role/generator/kl" not in metrics
