"""Per-role and per-agent gradient figures from snapshots equal separate backward passes.

A tiny random Qwen3 and a hand-made Voting batch (roles generator ×3 agents and aggregator),
under every sharing mode, LoRA and full fine-tuning, with micro-batches larger and smaller
than a segment. The expected figures come from one backward pass per role and per agent on
its turns alone (same global normaliser); the instrumented update must report the same norms,
shares and cosines, and leave the parameters exactly as an un-instrumented update does.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tests.trainer.voting_setup import AGENTS, PAD, build, random_turn, voting_config
from trainer.episode import Turn
from trainer.gradients import GradientTracker, coherence_scales
from trainer.loss import grpo_loss, make_batch, token_logprobs
from trainer.policies import PolicySet
from trainer.update import batch_normalizer, update_policies
from vocabulary.names import grad_cos_key


def make_turns(config, policies: PolicySet) -> list[Turn]:
    """2 problems × 2 rollouts of Voting; sampling log-probs near the model's own."""
    gen = torch.Generator().manual_seed(7)
    turns = [
        random_turn(config, agent, role, gen, prompt_len=None)
        for _problem in range(2)
        for _sample in range(2)
        for agent, role in AGENTS
    ]
    for t in turns:  # old log-probs = current ones + noise: ratios ≠ 1, some tokens clipped
        batch = make_batch([t], PAD)
        with torch.no_grad(), policies.use(t.policy) as model:
            logps, _ = token_logprobs(
                model, batch.input_ids, batch.attention_mask, batch.completion_len, 0.7
            )
        noise = torch.randn(logps.shape[1], generator=gen) * 0.3
        t.logprobs = (logps[0] + noise).tolist()
    return turns


def flat_grad(params: list[nn.Parameter]) -> torch.Tensor:
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    )


def separate_gradient(policies, name, turns, normalizer, config) -> torch.Tensor:
    """The gradient of `turns`' share of the loss, from its own single forward/backward."""
    params = policies.parameters(name)
    for p in params:
        p.grad = None
    batch = make_batch(turns, PAD)
    betas = torch.tensor([config.kl_for(t.role) for t in turns])
    ref = None
    if betas.max() > 0:
        with policies.reference() as model:
            ref, _ = token_logprobs(
                model, batch.input_ids, batch.attention_mask, batch.completion_len, 0.7
            )
    with policies.use(name, train=True) as model:
        logps, _ = token_logprobs(
            model, batch.input_ids, batch.attention_mask, batch.completion_len, 0.7
        )
        loss, _ = grpo_loss(
            logps,
            batch.old_logps,
            batch.advantages,
            batch.completion_mask,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            loss_agg=config.loss_agg,
            normalizer=normalizer,
            ref_logps=ref,
            kl_beta=betas if ref is not None else None,
        )
        loss.backward()
    grad = flat_grad(params).clone()
    for p in params:
        p.grad = None
    return grad


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a.double() @ b.double() / (a.double().norm() * b.double().norm()))


def expected_figures(policies: PolicySet, turns: list[Turn], config) -> dict[str, float]:
    role_sq: dict[str, float] = {}
    shares: dict[str, list[float]] = {}
    out: dict[str, float] = {}
    for name in policies.names:
        mine = [t for t in turns if t.policy == name]
        normalizer = batch_normalizer(mine, config)
        roles = sorted({t.role for t in mine})
        g_role = {
            r: separate_gradient(
                policies, name, [t for t in mine if t.role == r], normalizer, config
            )
            for r in roles
        }
        total = separate_gradient(policies, name, mine, normalizer, config)
        out[f"policy/{name}/grad_norm"] = float(total.norm())
        norms = {r: float(g.norm()) for r, g in g_role.items()}
        for r in roles:
            role_sq[r] = role_sq.get(r, 0.0) + norms[r] ** 2
            shares.setdefault(r, []).append(norms[r] / sum(norms.values()))
        for i, a in enumerate(roles):
            for b in roles[i + 1 :]:
                out[f"grad_cos/{a}|{b}"] = cos(g_role[a], g_role[b])
        agents = sorted({t.agent for t in mine if t.role == "generator"})
        g_agent = {
            a: separate_gradient(
                policies, name, [t for t in mine if t.agent == a], normalizer, config
            )
            for a in agents
        }
        for a in agents:
            out[f"agent/{a}/grad_norm"] = float(g_agent[a].norm())
        for i, a in enumerate(agents):
            for b in agents[i + 1 :]:
                out[f"grad_cos/{a}|{b}"] = cos(g_agent[a], g_agent[b])
    for r, sq in role_sq.items():
        out[f"role/{r}/grad_norm"] = math.sqrt(sq)
        out[f"role/{r}/grad_share"] = sum(shares[r]) / len(shares[r])
    return out


CASES = [
    # micro-batches bigger than any segment, plain GRPO
    dict(micro_batch_size=16),
    # micro-batches smaller than a segment (accumulation), token-mean loss, a KL on generators
    dict(micro_batch_size=2, loss_agg="token-mean", kl_beta_per_role={"generator": 0.05}),
    # packed micro-batches of at most 24 tokens (2–3 turns, no padding), a KL on generators
    dict(micro_batch_tokens=24, kl_beta_per_role={"generator": 0.05}),
]


# voting_config's small Voting run with make_config's defaults where these tests rely on them.
PLAIN = dict(max_new_tokens=8, kl_beta=0.0, steps=500, micro_batch_size=32)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("finetune", ["lora", "full"])
@pytest.mark.parametrize("sharing", ["shared", "per_role", "per_agent"])
def test_snapshot_figures_equal_separate_backward_passes(sharing, finetune, case):
    config = voting_config(
        **{**PLAIN, "sharing": sharing, "finetune": finetune, "temperature": 0.7, **CASES[case]}
    )
    policies = build(config)
    turns = make_turns(config, policies)
    expected = expected_figures(policies, turns, config)
    metrics = update_policies(policies, turns, config, tokenizer_pad_id=PAD)

    gradient_keys = {k for k in metrics if k.startswith(("role/", "agent/", "grad_cos/"))}
    gradient_keys = {
        k for k in gradient_keys if k.endswith(("grad_norm", "grad_share")) or "cos" in k
    }
    gradient_keys |= {k for k in metrics if k.startswith("policy/") and k.endswith("grad_norm")}
    assert gradient_keys == set(expected)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-7), key
    if sharing == "shared":
        assert metrics["role/generator/grad_share"] + metrics["role/aggregator/grad_share"] == (
            pytest.approx(1.0)
        )
        assert "grad_cos/aggregator|generator" in metrics
    else:
        assert metrics["role/generator/grad_share"] == pytest.approx(1.0)

    # The instrumentation must not change the update at all.
    plain = build(config)
    update_policies(
        plain, make_turns(config, plain), config, tokenizer_pad_id=PAD, instrument=False
    )
    for name in policies.names:
        for a, b in zip(policies.parameters(name), plain.parameters(name)):
            assert torch.equal(a, b)


def test_instrumentation_leaves_mini_batched_updates_unchanged():
    config = voting_config(**{**PLAIN, "mini_batches": 2, "micro_batch_size": 3}, sharing="shared")
    runs = []
    for instrument in (True, False):
        policies = build(config)
        metrics = update_policies(
            policies,
            make_turns(config, policies),
            config,
            tokenizer_pad_id=PAD,
            instrument=instrument,
        )
        runs.append((policies, metrics))
    (a, with_figures), (b, without) = runs
    for p, q in zip(a.parameters("shared"), b.parameters("shared")):
        assert torch.equal(p, q)
    assert with_figures["role/generator/opt_steps"] == 2
    assert "role/generator/grad_norm" in with_figures and "role/generator/grad_norm" not in without
    assert with_figures["train/loss"] == without["train/loss"]


def test_tracker_splits_and_recombines_gradients():
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    params = list(layer.parameters())
    x = torch.randn(6, 4)
    pieces = {"a0": x[:2], "a1": x[2:4], "b0": x[4:]}
    separate = {}
    for agent, inputs in pieces.items():
        layer.zero_grad()
        layer(inputs).pow(2).sum().backward()
        separate[agent] = flat_grad(params).clone()

    layer.zero_grad()
    tracker = GradientTracker(params)
    for agent, inputs in pieces.items():
        layer(inputs).pow(2).sum().backward()
        tracker.end_segment(agent[0], agent)
    figures = tracker.finish()
    g_a, g_b = separate["a0"] + separate["a1"], separate["b0"]
    torch.testing.assert_close(tracker.roles["a"], g_a)
    torch.testing.assert_close(tracker.roles["b"], g_b)
    assert figures.role_sq["a"] == pytest.approx(float(g_a @ g_a), rel=1e-5)
    assert figures.agent_sq["a1"] == pytest.approx(float(separate["a1"] @ separate["a1"]), rel=1e-5)
    assert figures.cos[grad_cos_key("a1", "a0")] == pytest.approx(
        cos(separate["a0"], separate["a1"]), rel=1e-5
    )
    assert figures.cos[grad_cos_key("b", "a")] == pytest.approx(cos(g_a, g_b), rel=1e-5)
    assert sum(figures.shares().values()) == pytest.approx(1.0)

    before = flat_grad(params).clone()
    tracker.write_back({"a": 1.0, "b": 1.0})
    assert torch.equal(flat_grad(params), before)  # nothing to rescale: .grad untouched
    tracker.write_back({"a": 0.5, "b": 2.0})
    torch.testing.assert_close(flat_grad(params), 0.5 * g_a + 2.0 * g_b)


def test_coherence_damps_a_role_that_keeps_its_direction():
    ema: dict = {}
    g = torch.tensor([1.0, 2.0, 0.0])
    first = coherence_scales({"r": g}, ema, "p", lam=0.5, decay=0.9)
    assert first == {"r": (1.0, None)}
    same = coherence_scales({"r": g}, ema, "p", lam=0.5, decay=0.9)
    assert same["r"][0] == pytest.approx(0.5) and same["r"][1] == pytest.approx(1.0)
    opposite = coherence_scales({"r": -g}, ema, "p", lam=0.5, decay=0.9)
    assert opposite["r"][0] == 1.0  # only agreement is damped
    torch.testing.assert_close(ema[("p", "r")], 0.9 * g + 0.1 * -g)
