"""One builder of Voting policies and turns for the update's tests (test_update.py,
test_gradients_exact.py, the data-parallel ranks of dist_ranks.py, and those importing them).

`voting_config` is a small Voting config on the tiny random Qwen3; `build` its policies, with
non-zero, distinct LoRA adapters (so every LoRA factor gets a gradient) and, given a `world`
of several ranks, sharded full fine-tuning; `random_turn` one turn of an agent with random
prompt, completion, sampling log-probs and advantage, drawn from `gen` in a fixed order (the
callers replace what their test needs fixed); `assert_same_update` that two ways of running
an update gave the same metrics and weights.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer.config import make_config
from trainer.distributed import SOLO, World
from trainer.episode import Turn
from trainer.policies import PolicySet, agent_policy, policy_names

PAD = 0
AGENTS = [(f"generator{i}", "generator") for i in range(3)] + [("aggregator", "aggregator")]


def voting_config(**values):
    base = dict(
        workflow="voting",
        lora_r=4,
        lora_alpha=8,
        lr=1e-2,
        warmup_steps=0,
        steps=5,
        max_new_tokens=6,
        micro_batch_size=4,
        kl_beta=0.05,
    )
    return make_config(**{**base, **values})


def build(config, world: World = SOLO) -> PolicySet:
    """Policies every caller (and every rank) builds identically from a seeded model."""
    policies = PolicySet(tiny_qwen3(), config, policy_names(config), world)
    if config.finetune == "lora":
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name in policies.names:
                for p in policies.parameters(name):
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return policies


def random_turn(
    config, agent: str, role: str, gen: torch.Generator, prompt_len: int | None = 5
) -> Turn:
    """A turn of `agent`: a prompt of `prompt_len` tokens (None: 3–7), a completion of 2–6,
    sampling log-probs near −4, an advantage drawn from N(0, 1)."""
    n_prompt = prompt_len or int(torch.randint(3, 8, (1,), generator=gen))
    n = int(torch.randint(2, 7, (1,), generator=gen))
    return Turn(
        role,
        agent,
        agent_policy(config, agent, role),
        0,
        prompt_ids=torch.randint(1, 64, (n_prompt,), generator=gen).tolist(),
        completion_ids=torch.randint(1, 64, (n,), generator=gen).tolist(),
        logprobs=(torch.randn(n, generator=gen) * 0.3 - 4.0).tolist(),
        advantage=float(torch.randn((), generator=gen)),
    )


def assert_same_update(
    got: dict, want: dict, ours: PolicySet, theirs: PolicySet, *, weights_atol: float = 1e-5
) -> None:
    """Two updates' metrics agree (1e-4 relative) and so do their policies' weights."""
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    for name in ours.names:
        for p, q in zip(ours.parameters(name), theirs.parameters(name), strict=True):
            assert torch.allclose(p, q, atol=weights_atol), name
