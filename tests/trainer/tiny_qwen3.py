"""The small random Qwen3 the trainer's unit tests build policies on (not the warm-started
`tiny-s`: these tests need a model in microseconds, not one that can do arithmetic)."""

from __future__ import annotations

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def tiny_qwen3(seed: int = 0, **overrides) -> Qwen3ForCausalLM:
    """A 2-layer Qwen3 over 64 tokens with weights drawn from `seed`; `overrides` go to its
    Qwen3Config (special token ids, say)."""
    torch.manual_seed(seed)
    config = Qwen3Config(
        **{
            "vocab_size": 64,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "max_position_embeddings": 128,
            "tie_word_embeddings": False,
            **overrides,
        }
    )
    return Qwen3ForCausalLM(config)
