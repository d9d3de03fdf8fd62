"""The fused Triton token picker against the plain one, under Triton's interpreter.

Run by tests/trainer/test_fused_sampling.py in a process with TRITON_INTERPRET=1 set before
Triton is imported (not collected on its own: the name does not start with test_).
"""

from __future__ import annotations

import os

import pytest
import torch

from trainer import fused_sampling
from trainer.sampling import pick_tokens

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before Triton is imported", allow_module_level=True)


def _batch(rows: int, vocab: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    seeds = torch.randint(0, 2**62, (rows,), generator=gen)
    return logits, seeds


# Vocabularies below, at and across the kernel's block (2048), and one not a multiple of it.
@pytest.mark.parametrize("vocab", [7, 2048, 5003])
@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.3])
def test_the_kernel_picks_what_the_plain_code_picks(vocab, temperature):
    fast = fused_sampling.fused_picker(pick_tokens)
    logits, seeds = _batch(6, vocab, seed=vocab)
    for position in (0, 1, 37, 1023):
        where = torch.tensor([position])
        got = fast(logits, seeds, where, temperature)
        want = pick_tokens(logits, seeds, where, temperature)
        assert torch.equal(got[0], want[0]), (position, got[0], want[0])
        # float32 online log-sum-exp against torch's log_softmax
        assert torch.allclose(got[1], want[1], atol=1e-4, rtol=0)


def test_a_wide_vocabulary_ties_break_to_the_first_maximum():
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


def test_greedy_and_a_host_position_go_to_the_plain_code():
    fast = fused_sampling.fused_picker(pick_tokens)
    logits, seeds = _batch(4, 300, seed=1)
    assert torch.equal(fast(logits, seeds, 3, 0.7)[0], pick_tokens(logits, seeds, 3, 0.7)[0])
    assert torch.equal(fast(logits, seeds, torch.tensor([3]), 0.0)[0], logits.argmax(-1))


def test_the_checked_picker_is_the_kernel_when_it_agrees():
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert status == "on" and pick is not pick_tokens
