"""The fused Triton token picker against the plain one, and how the sampler is told which to use.

The kernel runs here under Triton's interpreter (`TRITON_INTERPRET=1`, set before the kernel
module is imported): the same program a GPU compiles, run with numpy on the CPU.
"""

from __future__ import annotations

import sys

import pytest
import torch

from tests.trainer.test_sampler import CALL, PROMPTS, SEEDS
from tests.trainer.test_sampler import model as model  # noqa: F401 (the module's fixture)
from trainer import fused_sampling
from trainer.engines.hf import HFEngine
from trainer.sampling import Decoding, generate, pick_tokens


@pytest.fixture
def interpreted(monkeypatch):
    """The kernel module imported afresh under Triton's interpreter (and dropped after)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delitem(sys.modules, "trainer.pick_kernel", raising=False)
    yield
    sys.modules.pop("trainer.pick_kernel", None)


def _batch(rows: int, vocab: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    seeds = torch.randint(0, 2**62, (rows,), generator=gen)
    return logits, seeds


# Vocabularies below, at and across the kernel's block (2048), and one not a multiple of it.
@pytest.mark.parametrize("vocab", [7, 2048, 5003])
@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.3])
def test_the_kernel_picks_what_the_plain_code_picks(interpreted, vocab, temperature):
    fast = fused_sampling.fused_picker(pick_tokens)
    logits, seeds = _batch(6, vocab, seed=vocab)
    for position in (0, 1, 37, 1023):
        where = torch.tensor([position])
        got = fast(logits, seeds, where, temperature)
        want = pick_tokens(logits, seeds, where, temperature)
        assert torch.equal(got[0], want[0]), (position, got[0], want[0])
        # float32 online log-sum-exp against torch's log_softmax
        assert torch.allclose(got[1], want[1], atol=1e-4, rtol=0)


def test_a_wide_vocabulary_ties_break_to_the_first_maximum(interpreted):
    """Equal logits everywhere but a plateau: the Gumbel noise decides, as in the plain code,
    and a row of all -inf but one token picks that token with log-prob 0."""
    fast = fused_sampling.fused_picker(pick_tokens)
    logits = torch.zeros(3, 4500)
    logits[2] = float("-inf")
    logits[2, 4321] = 5.0
    seeds = torch.tensor([1, 2, 3])
    got = fast(logits, seeds, torch.tensor([5]), 0.7)
    want = pick_tokens(logits, seeds, torch.tensor([5]), 0.7)
    assert torch.equal(got[0], want[0]) and int(got[0][2]) == 4321
    assert torch.allclose(got[1], want[1], atol=1e-5) and float(got[1][2]) == 0.0


def test_greedy_and_a_host_position_go_to_the_plain_code(interpreted):
    fast = fused_sampling.fused_picker(pick_tokens)
    logits, seeds = _batch(4, 300, seed=1)
    assert torch.equal(fast(logits, seeds, 3, 0.7)[0], pick_tokens(logits, seeds, 3, 0.7)[0])
    assert torch.equal(fast(logits, seeds, torch.tensor([3]), 0.0)[0], logits.argmax(-1))


def test_the_checked_picker_is_the_kernel_when_it_agrees(interpreted):
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert status == "on" and pick is not pick_tokens


def test_the_checked_picker_keeps_the_plain_code_when_the_kernel_disagrees(monkeypatch):
    def off_by_one(reference):
        def pick(logits, seeds, position, temperature):
            choice, logp = reference(logits, seeds, position, temperature)
            return (choice + 1) % logits.shape[-1], logp

        return pick

    monkeypatch.setattr(fused_sampling, "fused_picker", off_by_one)
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert pick is pick_tokens
    assert status == "off (tokens differ at vocab 5003, temperature 0.7)"


def test_the_checked_picker_keeps_the_plain_code_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "trainer.pick_kernel", None)  # the import fails
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert pick is pick_tokens and status.startswith("off (ModuleNotFoundError")


def test_the_caller_says_which_picker_samples(model):  # noqa: F811
    """`generate` uses the picker it is given, nothing a process remembers; the CPU's default is
    the plain picker."""
    calls = []

    def counted(logits, seeds, position, temperature):
        calls.append(1)
        return pick_tokens(logits, seeds, position, temperature)

    plain = generate(model, PROMPTS, seeds=SEEDS, max_new_tokens=6, **CALL)
    spied = generate(
        model, PROMPTS, seeds=SEEDS, max_new_tokens=6, decoding=Decoding(pick=counted), **CALL
    )
    assert calls and [s.completion_ids for s in spied] == [s.completion_ids for s in plain]
    assert Decoding.for_device("cpu") == Decoding()


def test_the_hf_engine_keeps_one_decoding(model):  # noqa: F811
    class One:  # the one policy the engine generates with
        @staticmethod
        def use(name):
            import contextlib

            return contextlib.nullcontext(model)

    engine = HFEngine(One())
    args = dict(seeds=SEEDS[:2], max_new_tokens=[3, 3], temperature=0.7, eos_ids=[], pad_id=0)
    engine.generate("p", PROMPTS[:2], **args)
    first = engine.decoding
    engine.generate("p", PROMPTS[:2], **args)
    assert first is engine.decoding and first.picker == "plain"
