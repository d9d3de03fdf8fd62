"""Measure the peak memory of one update on the CPU, for tests/trainer/test_memory.py.

The CPU allocator's running total is read through torch.profiler (`profile_memory=True`): the
peak it reports during the step, plus every tensor the policies held before it (weights,
buffers, optimizer state), is the step's peak."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from trainer.config import Config
from trainer.episode import Turn
from trainer.policies import PolicySet, agent_policy, policy_names, role_of, workflow_agents
from trainer.update import update_policies

SHAPE = dict(
    vocab_size=1024,
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=256,
    tie_word_embeddings=True,
)
PROMPT, COMPLETION = 48, 24


def held_bytes(policies: PolicySet) -> int:
    tensors = {}
    modules = [policies.model] if policies.finetune == "lora" else list(policies._models.values())
    if policies._reference is not None:
        modules.append(policies._reference)
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            tensors[t.data_ptr()] = t.numel() * t.element_size()
    for name in policies.names:
        for state in policies.optimizer(name).state.values():
            for t in state.values():
                if torch.is_tensor(t) and t.numel() > 1:
                    tensors[t.data_ptr()] = t.numel() * t.element_size()
    return sum(tensors.values())


def turns_for(config: Config, per_agent: int, seed: int = 0) -> list[Turn]:
    gen = torch.Generator().manual_seed(seed)
    turns = []
    for agent in workflow_agents(config):
        role = role_of(agent)
        for i in range(per_agent):
            turns.append(
                Turn(
                    role,
                    agent,
                    agent_policy(config, agent, role),
                    0,
                    prompt_ids=torch.randint(1, 1024, (PROMPT,), generator=gen).tolist(),
                    completion_ids=torch.randint(1, 1024, (COMPLETION,), generator=gen).tolist(),
                    logprobs=[-7.0] * COMPLETION,
                    advantage=1.0 if i % 2 else -1.0,
                )
            )
    return turns


def measured_peak(policies: PolicySet, config: Config, turns: list[Turn]) -> int:
    # A first step allocates AdamW's state; the measured step is the second, as in a run.
    update_policies(policies, turns, config, tokenizer_pad_id=0)
    before = held_bytes(policies)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        update_policies(policies, turns, config, tokenizer_pad_id=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return before + max(totals, default=0)


def build(config: Config, shape: dict | None = None) -> PolicySet:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**(shape or SHAPE)))
    return PolicySet(model, config, policy_names(config))


def measured_generate_peak(policies: PolicySet, sequences: int, prompt: int, new: int) -> int:
    """Peak bytes of one generation call of `sequences` rows (`prompt` + `new` tokens each, no
    end token), measured like `measured_peak`, with the policies' tensors held before it."""
    from trainer.sampling import generate

    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, 1024, (prompt,), generator=gen).tolist() for _ in range(sequences)]
    before = held_bytes(policies)
    with policies.use(policies.names[0]) as model:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            generate(
                model,
                prompts,
                seeds=list(range(sequences)),
                max_new_tokens=new,
                temperature=0.7,
                eos_ids=[-1],
                pad_id=0,
            )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return before + max(totals, default=0)
