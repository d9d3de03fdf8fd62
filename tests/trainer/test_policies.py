"""Routing from agents to policies, and the PolicySet's adapters, reference and checkpoints."""

from __future__ import annotations

import pytest
import torch

from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer.config import make_config
from trainer.policies import PolicySet, lr_factor
from trainer.routing import agent_policy, policy_names, workflow_agents


def config_for(**values):
    base = dict(workflow="voting", lora_r=4, lora_alpha=8, lr=1e-2, warmup_steps=0, steps=10)
    return make_config(**{**base, **values})


IDS = torch.tensor([[5, 9, 13, 2, 40, 41, 7, 3]])


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


def test_routing_follows_the_sharing_mode():
    cases = {
        "shared": (["shared"], "shared"),
        "per_role": (["generator", "aggregator"], "generator"),
        "per_agent": (["generator0", "generator1", "generator2", "aggregator"], "generator1"),
    }
    for sharing, (names, generator1_policy) in cases.items():
        config = config_for(sharing=sharing)
        assert policy_names(config) == names
        assert agent_policy(config, "generator1", "generator") == generator1_policy
        assert agent_policy(config, "aggregator", "aggregator") in names


def test_workflow_agents_and_explicit_agent_lists():
    orch = config_for(workflow="orch_workers", max_subtasks=2, sharing="per_agent")
    assert workflow_agents(orch) == ["orchestrator", "worker0", "worker1", "synthesizer"]
    assert policy_names(orch) == ["orchestrator", "worker0", "worker1", "synthesizer"]
    per_role = config_for(workflow="orch_workers", sharing="per_role")
    assert policy_names(per_role) == ["orchestrator", "worker", "synthesizer"]
    assert policy_names(config_for(workflow="eval_opt", sharing="per_agent")) == [
        "generator",
        "evaluator",
    ]
    assert policy_names(config_for(workflow="single", sharing="per_role")) == ["solver"]
    voting = config_for(sharing="per_agent")
    assert policy_names(voting, ["generator0", "aggregator"]) == ["generator0", "aggregator"]


def test_lora_adapters_are_independent():
    config = config_for(sharing="per_role")
    policies = PolicySet(tiny_qwen3(), config, ["generator", "aggregator"])
    gen, agg = policies.parameters("generator"), policies.parameters("aggregator")
    assert not {id(p) for p in gen} & {id(p) for p in agg}
    assert policies.trainable_parameter_count() == sum(p.numel() for p in gen + agg)
    agg_before = [p.detach().clone() for p in agg]
    gen_before = [p.detach().clone() for p in gen]

    for name in ("aggregator", "generator"):
        with policies.use(name, train=True) as model:
            trainable = {id(p) for p in model.parameters() if p.requires_grad}
            assert trainable == {id(p) for p in policies.parameters(name)}

    with policies.use("generator", train=True) as model:
        model(input_ids=IDS).logits.square().mean().backward()
    assert all(p.grad is None for p in agg), "gradient leaked into the inactive adapter"
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in gen)
    policies.optimizer("generator").step()

    assert all(torch.equal(a, b) for a, b in zip(agg, agg_before))
    assert any(not torch.equal(a, b) for a, b in zip(gen, gen_before))


def test_use_runs_the_named_adapter():
    policies = PolicySet(tiny_qwen3(), config_for(sharing="per_role"), ["generator", "aggregator"])
    with torch.no_grad():
        for p in policies.parameters("generator"):
            p.normal_(0, 0.5)
    with policies.use("generator") as model:
        assert not model.training
        gen = logits(model)
    with policies.use("aggregator") as model:
        agg = logits(model)  # its LoRA B is still zero: it computes the base model
    with policies.reference() as model:
        ref = logits(model)
    assert not torch.allclose(gen, agg)
    torch.testing.assert_close(agg, ref)


def test_reference_is_the_base_model():
    base_logits = logits(tiny_qwen3(seed=3))
    for finetune in ("lora", "full"):
        config = config_for(sharing="per_role", finetune=finetune, kl_beta=0.1)
        policies = PolicySet(tiny_qwen3(seed=3), config, ["generator", "aggregator"])
        with torch.no_grad():
            for name in policies.names:
                for p in policies.parameters(name):
                    p.add_(torch.randn_like(p) * 0.3)
        with policies.use("generator") as model:
            assert not torch.allclose(logits(model), base_logits, atol=1e-4)
        with policies.reference() as model:
            torch.testing.assert_close(logits(model), base_logits)


def test_full_finetune_copies_and_reference_only_with_kl():
    config = config_for(sharing="per_role", finetune="full")
    policies = PolicySet(tiny_qwen3(), config, ["generator", "aggregator"])
    n = sum(p.numel() for p in tiny_qwen3().parameters())
    assert policies.trainable_parameter_count() == 2 * n
    with pytest.raises(RuntimeError, match="kl_beta"):
        with policies.reference():
            pass
    gen_ids = {id(p) for p in policies.parameters("generator")}
    assert not gen_ids & {id(p) for p in policies.parameters("aggregator")}


def test_schedule_warms_up_then_decays():
    def factors(schedule):
        return [lr_factor(s, warmup_steps=2, total_steps=6, schedule=schedule) for s in range(6)]

    assert factors("constant") == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert factors("linear") == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    cosine = factors("cosine")
    assert cosine[:3] == [0.5, 1.0, 1.0] and cosine[3] > 0.75 > cosine[4] > cosine[5] > 0
    config = config_for(sharing="shared", warmup_steps=2, lr=0.1, schedule="constant")
    policies = PolicySet(tiny_qwen3(), config, ["shared"])
    assert policies.scheduler("shared").get_last_lr() == [0.05]
    policies.optimizer("shared").step()
    policies.scheduler("shared").step()
    assert policies.scheduler("shared").get_last_lr() == [0.1]


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_state_dict_round_trip(finetune):
    config = config_for(sharing="per_role", finetune=finetune)
    policies = PolicySet(tiny_qwen3(), config, ["generator", "aggregator"])
    for name in policies.names:
        with policies.use(name, train=True) as model:
            model(input_ids=IDS).logits.square().mean().backward()
        policies.optimizer(name).step()
        policies.scheduler(name).step()
        policies.optimizer(name).zero_grad()
    policies.coherence[("generator", "generator")] = torch.ones(3)
    state = policies.state_dict()
    with policies.use("generator") as model:
        expected = logits(model)

    restored = PolicySet(tiny_qwen3(), config, ["generator", "aggregator"])
    with restored.use("generator") as model:
        assert not torch.allclose(logits(model), expected)
    restored.load_state_dict(state)
    with restored.use("generator") as model:
        torch.testing.assert_close(logits(model), expected)
    for name in policies.names:
        for a, b in zip(policies.parameters(name), restored.parameters(name)):
            assert torch.equal(a, b)
        assert restored.scheduler(name).last_epoch == 1
        opt_state = restored.optimizer(name).state_dict()["state"]
        assert opt_state and all(int(s["step"]) == 1 for s in opt_state.values())
    assert torch.equal(restored.coherence[("generator", "generator")], torch.ones(3))

    with pytest.raises(ValueError, match="policies"):
        PolicySet(tiny_qwen3(), config, ["generator", "worker"]).load_state_dict(state)
