"""Liger's fused RMSNorm and SwiGLU, and torch.compile'd decoder layers (`trainer/kernels.py`),
against the exact path.

On the CPU only the refusal can be tested (Liger's kernels have no CPU path, not even under
Triton's interpreter); on a GPU with liger-kernel installed, the patched model's log-probs and
LoRA gradients must equal the exact path's within fp32 tolerances (1e-4 absolute on log-probs,
1e-3 relative on the gradient norm and 1e-4 on 1 − cosine). Full parameters in fp32, no
autocast: the kernels' own rounding, not bf16's.

Compiled layers run on the CPU too (Inductor with the system's C++ compiler): a whole per-role
LoRA update, packed, with them gives the exact update's metrics within 1e-4 relative and its
weights within 1e-4 (AdamW's first step, as tests/trainer/test_packing.py explains), with one
graph for every layer and pass length.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer.test_gradients_exact import make_turns
from tests.trainer.tiny_qwen3 import tiny_qwen3
from tests.trainer.voting_setup import (
    PAD,
    assert_same_update,
    build,
    random_turn,
    voting_config,
)
from trainer.kernels import use_kernels
from trainer.loss import batch_logprobs, make_batch
from trainer.policies import PolicySet, policy_names
from trainer.update import update_policies


def test_liger_is_refused_off_cuda_and_exact_changes_nothing():
    model = tiny_qwen3()
    with pytest.raises(ValueError, match="kernels=liger runs on CUDA only"):
        use_kernels(model, "liger")
    with pytest.raises(ValueError, match="kernels must be one of exact, liger, compile"):
        use_kernels(model, "fast")
    before = [type(m).forward for m in model.modules()]
    assert use_kernels(model, "exact") == 0
    assert [type(m).forward for m in model.modules()] == before


def _logps_and_grad(model, turns):
    batch = make_batch(turns, PAD, device="cuda")
    logps, _ = batch_logprobs(model, batch, 0.7, with_entropy=False)
    (logps * batch.completion_mask).sum().backward()
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return logps.detach(), grad


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Liger's kernels need CUDA")
def test_liger_kernels_give_the_exact_paths_log_probs_and_gradients():
    pytest.importorskip("liger_kernel")
    config = voting_config()
    gen = torch.Generator().manual_seed(0)
    turns = [random_turn(config, "generator0", "generator", gen, None) for _ in range(6)]
    results = []
    for kernels in ("exact", "liger"):
        model = tiny_qwen3().to("cuda")  # fp32, the same seeded weights both times
        assert (use_kernels(model, kernels) > 0) == (kernels == "liger")
        results.append(_logps_and_grad(model, turns))
    (exact, g_exact), (fused, g_fused) = results
    torch.testing.assert_close(fused, exact, atol=1e-4, rtol=0)
    assert float(g_fused.norm()) == pytest.approx(float(g_exact.norm()), rel=1e-3)
    cos = torch.nn.functional.cosine_similarity(g_fused, g_exact, dim=0)
    assert 1 - float(cos) < 1e-4


def count_compiled_calls(monkeypatch) -> list[int]:
    """Record each call of the compiled decoder-layer forward (trainer/kernels.py). Dynamo's
    own counters would not do: a graph an earlier test compiled in this process is reused
    without being counted again."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

    from trainer import kernels

    calls: list[int] = []
    compiled = kernels._COMPILED.get(Qwen3DecoderLayer) or torch.compile(
        Qwen3DecoderLayer.forward, dynamic=True
    )

    def counting(*args, **kwargs):
        calls.append(1)
        return compiled(*args, **kwargs)

    monkeypatch.setitem(kernels._COMPILED, Qwen3DecoderLayer, counting)
    return calls


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "finetune, batch_adapters", [("lora", False), ("lora", True), ("full", False)]
)
def test_compiled_layers_give_the_exact_update(finetune, batch_adapters, monkeypatch):
    # Full: each policy and the KL reference (kl_beta 0.05) deep-copy the compiled model.
    # Batched adapters: the routing hooks sit on LoRA layers inside the compiled region.
    config = voting_config(
        sharing="per_role",
        finetune=finetune,
        micro_batch_tokens=60,
        batch_adapters=batch_adapters,
    )
    model = tiny_qwen3()
    assert use_kernels(model, "compile") == 2  # the tiny model's decoder layers
    compiled, exact = PolicySet(model, config, policy_names(config)), build(config)
    if finetune == "lora":  # `build`'s adapters
        for name in compiled.names:
            for p, q in zip(compiled.parameters(name), exact.parameters(name), strict=True):
                p.data.copy_(q.data)
    calls = count_compiled_calls(monkeypatch)
    got = update_policies(compiled, make_turns(config, compiled), config, tokenizer_pad_id=PAD)
    assert calls  # the layers did run compiled
    want = update_policies(exact, make_turns(config, exact), config, tokenizer_pad_id=PAD)
    assert_same_update(got, want, compiled, exact, weights_atol=1e-4)
