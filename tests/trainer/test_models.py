"""The real-model loading path, on a Qwen3 model saved to a local directory (no Hub access),
and the cache key of the built-in tiny models."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from trainer import tiny
from trainer.config import make_config
from trainer.models import ModelUnavailable, load_model
from trainer.rollout import Codec, FrozenPolicies, make_prompts, rollout
from trainer.tasks.base import Problem
from trainer.tiny import train_tokenizer

# The shape of Qwen3's template: ChatML turns, and an empty think block when thinking is off.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen3-local")
    tokenizer = train_tokenizer(
        ["Solve the following problem. Compute 2+3. Put the final answer in \\boxed{5}."] * 20,
        vocab_size=120,
    )
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]}
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    Qwen3ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_a_local_qwen3_directory_loads_as_a_chat_model(qwen3_dir):
    loaded = load_model(str(qwen3_dir), "cpu")
    assert loaded.family == "chat"
    assert type(loaded.model).__name__ == "Qwen3ForCausalLM"
    assert loaded.model.dtype == torch.float32  # bf16 only on CUDA


def test_chat_prompts_disable_thinking_and_roll_out(qwen3_dir):
    loaded = load_model(str(qwen3_dir), "cpu")
    config = make_config("cpu-demo", workflow="voting", model=str(qwen3_dir), n_voters=2)
    prompts = make_prompts(config, loaded.tokenizer, loaded.family)
    problem = Problem(id="q", question="Compute 2+3.", compact="2+3", answer="5")
    text = prompts.solve(problem)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "Put the final answer in \\boxed{}" in text

    class ExactMath:
        name = "math"

        def score_many(self, problems, completions):
            return [0.0 for _ in completions]

    episodes, stats = rollout(
        [problem],
        2,
        config=config,
        policies=FrozenPolicies(loaded.model),
        codec=Codec(loaded.tokenizer, add_bos=False),
        prompts=prompts,
        task=ExactMath(),
        temperature=0.7,
        seed_parts=(0,),
    )
    assert [t.role for t in episodes[0].turns] == ["generator", "generator", "aggregator"]
    assert stats.generate_calls == 2  # voters of both samples in one call, then aggregators


def test_a_hub_id_that_is_not_cached_names_the_model_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as err:
        load_model("Qwen/Qwen3-0.6B", "cpu")
    message = str(err.value)
    assert "Qwen/Qwen3-0.6B" in message and "local directory" in message


def test_a_directory_without_a_model_is_rejected_clearly(tmp_path):
    with pytest.raises(ModelUnavailable, match="no config.json"):
        load_model(str(tmp_path), "cpu")


def test_a_change_to_the_corpus_changes_the_tiny_models_cache_key():
    from trainer.transcripts import base

    before = tiny.recipe_hash("tiny-s")
    saved = base.P_AGGREGATE
    try:
        base.P_AGGREGATE = 0.9  # aggregators follow the majority a bit more often
        tiny.warm_start_corpus.cache_clear()
        tiny.corpus_digest.cache_clear()
        edited = tiny.recipe_hash("tiny-s")
    finally:
        base.P_AGGREGATE = saved
        tiny.warm_start_corpus.cache_clear()
        tiny.corpus_digest.cache_clear()
    # a model built on the old corpus is not the one the edited recipe would build
    assert edited != before
    assert tiny.recipe_hash("tiny-s") == before  # the same corpus, the same key
