"""Packed micro-batches (`micro_batch_tokens`): turns end to end without padding give the padded
path's log-probs, loss, metrics and update, within float32 rounding.

Tolerances: log-probs and entropies 1e-5 absolute (the same float32 sums in another order and
another attention mask); metrics (gradient norms, shares, cosines, token statistics) 1e-4
relative; parameters after one AdamW step 1e-4 absolute, 1% of the step (lr 1e-2): AdamW's
first step is lr·g/(|g| + ε), so a float32 rounding of a tiny gradient can move its weight's step
by more than the rounding itself.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer.test_update import snapshot, voting_turns
from tests.trainer.voting_setup import PAD, build, random_turn, voting_config
from trainer import grad_drill
from trainer.loss import PackedSize, batch_logprobs, make_batch, make_packed_batch
from trainer.update import update_policies


def _turns(n: int, seed: int = 3):
    config = voting_config()
    gen = torch.Generator().manual_seed(seed)
    return [random_turn(config, "generator0", "generator", gen, prompt_len=None) for _ in range(n)]


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_packed_log_probs_are_the_padded_ones(finetune):
    config = voting_config(finetune=finetune, sharing="shared")
    policies = build(config)
    turns = _turns(5)
    turns[2].completion_ids, turns[2].logprobs = [], []  # an empty completion among them
    padded, packed = make_batch(turns, PAD), make_packed_batch(turns, PAD)
    lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in turns]
    rows, width = packed.input_ids.shape  # rows as long as the longest turn, fewer than turns
    assert width == max(lengths) and rows <= len(turns)
    assert packed.input_ids.numel() <= padded.input_ids.numel()
    assert packed.attention_mask is None and packed.keep.numel() == int(
        padded.completion_mask.sum()
    )
    with policies.use("shared") as model:
        want, want_h = batch_logprobs(model, padded, 0.7)
        got, got_h = batch_logprobs(model, packed, 0.7)
    mask = padded.completion_mask.bool()
    assert torch.equal(got[~mask], torch.zeros_like(got[~mask]))
    torch.testing.assert_close(got[mask], want[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(got_h[mask], want_h[mask], atol=1e-5, rtol=0)


@pytest.mark.parametrize("row_tokens", [1, 20, 45])
def test_rows_of_a_packed_batch_give_the_padded_log_probs(row_tokens):
    config = voting_config(sharing="shared")
    policies = build(config)
    turns = _turns(7)
    padded, packed = make_batch(turns, PAD), make_packed_batch(turns, PAD, row_tokens=row_tokens)
    lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in turns]
    rows, width = packed.input_ids.shape
    assert rows > 1
    by_row: dict[int, list[int]] = {}
    for start, length in zip(packed.starts, lengths):
        by_row.setdefault(start // width, []).append(length)
    assert all(sum(r) <= row_tokens or len(r) == 1 for r in by_row.values())  # a long turn alone
    if row_tokens == 1:
        assert rows == len(turns) and width == max(lengths)  # a turn a row
    assert packed.keep_mask.sum() == packed.keep.numel() == int(padded.completion_mask.sum())
    for start, turn in zip(packed.starts, turns):  # each turn where `starts` says, positions 0..
        n = len(turn.prompt_ids) + len(turn.completion_ids)
        assert packed.input_ids.reshape(-1)[start : start + n].tolist() == [
            *turn.prompt_ids,
            *turn.completion_ids,
        ]
        assert packed.position_ids.reshape(-1)[start : start + n].tolist() == list(range(n))
    with policies.use("shared") as model:
        want, _ = batch_logprobs(model, padded, 0.7)
        got, _ = batch_logprobs(model, packed, 0.7)
    mask = padded.completion_mask.bool()
    torch.testing.assert_close(got[mask], want[mask], atol=1e-5, rtol=0)


def test_a_completion_without_a_prompt_is_refused():
    turn = _turns(1)[0]
    turn.prompt_ids = []
    with pytest.raises(ValueError, match="needs a prompt token"):
        make_packed_batch([turn], PAD)


def _packed_tokens(turns) -> int:
    return make_packed_batch(turns, PAD).input_ids.numel()


def test_token_budget_micro_batches():
    turns = _turns(9)
    lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in turns]
    chunks = list(grad_drill.chunks(turns, 4, tokens=20))
    assert [t for c in chunks for t in c] == turns  # in order, every turn once
    for chunk in chunks:  # the tensor the pass runs, padded row ends included, fits
        assert _packed_tokens(chunk) <= 20 or len(chunk) == 1
    # greedy: the next turn would not have fitted
    for this, after in zip(chunks, chunks[1:]):
        assert _packed_tokens([*this, after[0]]) > 20
    assert grad_drill.micro_batch_count(turns, 4, tokens=20) == len(chunks)
    assert grad_drill.micro_batch_count(turns, 4) == 3  # rows, as before
    long = list(grad_drill.chunks(turns, 4, tokens=min(lengths) - 1))
    assert [len(c) for c in long] == [1] * len(turns)  # a turn over the budget runs alone


def test_the_packed_size_is_the_packed_batch():
    gen = torch.Generator().manual_seed(5)
    turns = _turns(40)
    for start in range(0, 40, 8):  # random orders: a wider turn re-lays the rows out
        order = torch.randperm(40, generator=gen)[: start + 8].tolist()
        packed = PackedSize()
        for n, i in enumerate(order, 1):
            t = turns[i]
            length = len(t.prompt_ids) + len(t.completion_ids)
            want = _packed_tokens([turns[j] for j in order[:n]])
            assert packed.tokens_with(length) == want
            packed.add(length)
    widths = {len(t.prompt_ids) + len(t.completion_ids) for t in turns}
    assert len(widths) > 5  # the turns differ in length, so row ends are padded


@pytest.mark.parametrize(
    "sharing, finetune", [("per_role", "lora"), ("per_role", "full"), ("shared", "lora")]
)
def test_a_packed_update_is_the_padded_update(sharing, finetune):
    results = []
    for tokens in (0, 40):
        config = voting_config(sharing=sharing, finetune=finetune, micro_batch_tokens=tokens)
        policies = build(config)
        metrics = update_policies(policies, voting_turns(config), config, tokenizer_pad_id=PAD)
        results.append((snapshot(policies), metrics))
    (padded_weights, padded), (packed_weights, packed) = results
    assert set(packed) == set(padded)
    for key, value in padded.items():
        assert packed[key] == pytest.approx(value, rel=1e-4, abs=1e-7), key
    for name, weights in padded_weights.items():
        for a, b in zip(weights, packed_weights[name]):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=0)
