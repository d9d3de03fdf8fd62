"""The exact sampler's decode loop: the same tokens as recomputing every step from scratch, on
any batch layout and look-interval, and no host sync between two looks at `done`."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainer import sampling
from trainer.sampling import generate, pick_tokens

SHAPE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=512,
)


@pytest.fixture(scope="module")
def model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**SHAPE)).eval()


def _prompts(lengths):
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(1, 512, (n,), generator=gen).tolist() for n in lengths]


# 24 of 512 tokens end a completion: often enough that some rows stop before their budget.
CALL = dict(temperature=1.3, eos_ids=list(range(5, 100, 4)), pad_id=0)
PROMPTS = _prompts([5, 9, 3, 12, 7, 1])
SEEDS = [11, 22, 33, 44, 55, 66]
BUDGETS = [20, 7, 33, 1, 40, 25]


@torch.no_grad()
def _from_scratch(model, prompt, seed, budget, *, temperature, eos_ids, pad_id):
    """One row alone, every step a full forward pass over the whole sequence: no cache, no
    padding, no mask — what the sampler's tokens and log-probs must equal."""
    ids, logps = list(prompt), []
    for t in range(budget):
        logits = model(input_ids=torch.tensor([ids])).logits[:, -1, :].float()
        choice, logp = pick_tokens(logits, torch.tensor([seed]), t, temperature)
        ids.append(int(choice))
        logps.append(float(logp))
        if int(choice) in eos_ids:
            return ids[len(prompt) :], logps, False
    return ids[len(prompt) :], logps, True


def test_batched_decoding_samples_what_each_row_alone_would_from_scratch(model):
    samples = generate(model, PROMPTS, seeds=SEEDS, max_new_tokens=BUDGETS, **CALL)
    ended_early = 0
    for sample, prompt, seed, budget in zip(samples, PROMPTS, SEEDS, BUDGETS):
        tokens, logps, truncated = _from_scratch(model, prompt, seed, budget, **CALL)
        assert sample.completion_ids == tokens
        assert sample.truncated == truncated
        assert sample.logprobs == pytest.approx(logps, abs=1e-5, rel=0)
        ended_early += not truncated and len(tokens) < budget
    assert ended_early >= 2  # the case covers rows that stop before their budget


@pytest.mark.parametrize("every", [1, 5, 16, 64])
def test_looking_at_done_less_often_changes_nothing(model, monkeypatch, every):
    want = generate(model, PROMPTS, seeds=SEEDS, max_new_tokens=BUDGETS, **CALL)
    monkeypatch.setitem(sampling.CHECK_EVERY, "cpu", every)
    got = generate(model, PROMPTS, seeds=SEEDS, max_new_tokens=BUDGETS, **CALL)
    assert got == want


def test_greedy_decoding_matches_from_scratch(model):
    call = {**CALL, "temperature": 0.0}
    samples = generate(model, PROMPTS[:3], seeds=SEEDS[:3], max_new_tokens=BUDGETS[:3], **call)
    for sample, prompt, seed, budget in zip(samples, PROMPTS, SEEDS, BUDGETS):
        assert sample.completion_ids == _from_scratch(model, prompt, seed, budget, **call)[0]


class _HostReads(TorchDispatchMode):
    """Counts the operators that make the host wait for the device (`.item()`, `bool(t)`,
    data-dependent shapes): on a GPU each is a sync, and none can sit in a CUDA graph."""

    SYNCING = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "is_nonzero")

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func.overloadpacket).split(".")[-1] in self.SYNCING:
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_the_only_host_reads_are_the_looks_at_done(model, monkeypatch):
    monkeypatch.setitem(sampling.CHECK_EVERY, "cpu", 16)
    looks = []
    real = sampling._finished
    monkeypatch.setattr(sampling, "_finished", lambda done: looks.append(1) or real(done))
    with _HostReads() as reads:
        generate(
            model,
            _prompts([4, 6]),
            seeds=[1, 2],
            max_new_tokens=40,
            eos_ids=[-1],
            temperature=0.7,
            pad_id=0,
        )
    assert len(looks) == 2  # before steps 16 and 32 of 40; none in between
    assert reads.count == len(looks)  # prefill, steps and the final copy read nothing else


def test_a_finished_batch_stops_at_the_next_look(model, monkeypatch):
    monkeypatch.setitem(sampling.CHECK_EVERY, "cpu", 4)
    steps = []
    real = sampling._Decode.step
    monkeypatch.setattr(sampling._Decode, "step", lambda self: steps.append(1) or real(self))
    every_token_ends = list(range(SHAPE["vocab_size"]))
    samples = generate(
        model,
        _prompts([3, 5]),
        seeds=[5, 6],
        max_new_tokens=30,
        temperature=0.7,
        eos_ids=every_token_ends,
        pad_id=0,
    )
    assert [len(s.completion_ids) for s in samples] == [1, 1]
    assert len(steps) == 3  # idle steps 1–3 after the first token ended both rows, then a look
