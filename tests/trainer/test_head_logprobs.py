"""Fused log-probs (`fused_logprobs`, trainer/head_logprobs.py): Liger's chunked selective
log-prob from the final hidden states gives the exact path's log-probs, entropies, gradients,
update and metrics, without the vocabulary's logits held whole.

Liger's function is plain PyTorch, so all of it runs on the CPU. Tolerances: log-probs and
entropies 1e-5 absolute (float32 sums over the vocabulary in chunks, in another order);
gradients 1e-5 of their largest entry; metrics 1e-4 relative and weights 1e-5 after an update,
as tests/trainer/test_joint_lora.py states them.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import pytest
import torch
from peft import LoraConfig, get_peft_model

from tests.trainer.test_gradients_exact import flat_grad, make_turns
from tests.trainer.tiny_qwen3 import tiny_qwen3
from tests.trainer.voting_setup import (
    PAD,
    assert_same_update,
    build,
    random_turn,
    voting_config,
)
from trainer.config import ConfigError, make_config
from trainer.head_logprobs import decoder_and_head
from trainer.loss import batch_logprobs, make_batch, make_packed_batch
from trainer.memory import estimate, largest_token_budget, model_shape
from trainer.policies import PolicySet, policy_names
from trainer.update import update_policies

VOCAB = 9000  # above Liger's vocabulary chunk of 4,096: three chunks, the last a short one


def _turns(config, n: int = 6) -> list:
    """Turns whose completions pick tokens from every vocabulary chunk."""
    gen = torch.Generator().manual_seed(5)
    turns = [random_turn(config, "generator0", "generator", gen, prompt_len=None) for _ in range(n)]
    for i, t in enumerate(turns):
        t.completion_ids = [(c * 997 + i * 131) % VOCAB for c in t.completion_ids]
    return turns


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    "finetune, device", [("lora", "cpu"), ("full", "cpu"), pytest.param("lora", "cuda", marks=CUDA)]
)
@pytest.mark.parametrize("packed", [False, True])
def test_fused_logprobs_equal_the_exact_ones_with_their_gradients(packed, finetune, device):
    config = voting_config(finetune=finetune, sharing="shared")
    # Full fine-tuning on a tied head: its gradient reaches the embedding through both uses.
    model = tiny_qwen3(vocab_size=VOCAB, tie_word_embeddings=finetune == "full")
    policies = PolicySet(model, config, policy_names(config))
    if device == "cuda":  # LoRA: the passes then run under bf16 autocast
        policies.model.to(device)
    # bf16: the exact path's log-softmax over bf16 logits, Liger's in fp32 chunks.
    tol = 1e-5 if device == "cpu" else 5e-2
    turns = _turns(config)
    collate = partial(make_packed_batch, row_tokens=30) if packed else make_batch
    batch = collate(turns, PAD, device=device)
    mask = batch.completion_mask.bool()
    weights = torch.randn(mask.shape, generator=torch.Generator().manual_seed(2)).to(device)
    results = {}
    for fused in (False, True):
        for p in policies.parameters("shared"):
            p.grad = None
        with policies.use("shared", train=True) as m:
            logps, entropies = batch_logprobs(m, batch, 0.7, fused=fused)
        (logps * weights * mask).sum().backward()
        results[fused] = logps, entropies, flat_grad(policies.parameters("shared"))
    (want, want_h, want_g), (got, got_h, got_g) = results[False], results[True]
    assert got.shape == want.shape == mask.shape
    torch.testing.assert_close(got[mask], want[mask], atol=tol, rtol=0)
    torch.testing.assert_close(got_h[mask], want_h[mask], atol=tol, rtol=0)
    assert want_g.abs().max() > 0
    torch.testing.assert_close(got_g, want_g, atol=tol * want_g.abs().max(), rtol=0)


@pytest.mark.parametrize(
    "options",
    [
        dict(sharing="per_role", micro_batch_size=6),
        dict(sharing="per_role", micro_batch_tokens=60, mini_batches=2, kl_beta=0.0),
        dict(sharing="per_role", micro_batch_tokens=60, batch_adapters=True),
        dict(sharing="shared", finetune="full", grad_checkpointing="on"),
    ],
)
def test_an_update_with_fused_logprobs_equals_the_exact_one(options):
    config = voting_config(fused_logprobs=True, **options)
    fused, exact = build(config), build(dataclasses.replace(config, fused_logprobs=False))
    got = update_policies(fused, make_turns(config, fused), config, tokenizer_pad_id=PAD)
    want = update_policies(exact, make_turns(config, exact), config, tokenizer_pad_id=PAD)
    assert_same_update(got, want, fused, exact)


def test_what_fused_logprobs_cannot_run_is_refused_by_name():
    with pytest.raises(ConfigError) as error:
        make_config(fused_logprobs=True, lora_targets="q_proj,lm_head")
    assert "drop lm_head" in error.value.errors["fused_logprobs"]
    with pytest.raises(ConfigError) as error:
        make_config(fused_logprobs=True, world_size=2)
    assert "one process" in error.value.errors["fused_logprobs"]
    lora_head = get_peft_model(tiny_qwen3(), LoraConfig(r=2, target_modules=["lm_head"]))
    with pytest.raises(ValueError, match="LoRA on lm_head is not supported"):
        decoder_and_head(lora_head)
    decoder, head = decoder_and_head(get_peft_model(tiny_qwen3(), LoraConfig(r=2)))
    assert type(head) is torch.nn.Linear and decoder is not None


def test_the_estimate_counts_chunks_not_the_vocabulary_logits():
    long_answers = dict(
        model="Qwen/Qwen3-0.6B", device="cuda", max_new_tokens=4096, prompts_per_step=8
    )
    exact = make_config(micro_batch_tokens=32768, **long_answers)
    fused = dataclasses.replace(exact, fused_logprobs=True)
    shape = model_shape(exact.model)
    assert estimate(fused, shape).logits < estimate(exact, shape).logits / 10
    auto = dataclasses.replace(exact, micro_batch_tokens=-1)
    capacity = 40 * 2**30
    assert largest_token_budget(
        dataclasses.replace(auto, fused_logprobs=True), capacity
    ) > largest_token_budget(auto, capacity)
