"""The rollout phase of the memory estimate (trainer/memory.py) and `rollout_batch`, which
splits a generation call into chunks without changing a sampled token."""

from __future__ import annotations

import pytest

from tests.trainer.memory_probe import SHAPE, build, measured_generate_peak, turns_for
from trainer.config import ConfigError, make_config
from trainer.memory import (
    KNOWN_SHAPES,
    generation_calls,
    kv_bytes_per_token,
    rollout_estimate,
)
from trainer.update import update_policies

QWEN3_4B = KNOWN_SHAPES["Qwen/Qwen3-4B"]
PAPER_4B_VOTING = dict(model="Qwen/Qwen3-4B", workflow="voting")


def test_the_kv_cache_term_by_hand():
    # 2 (keys, values) × 36 layers × 8 kv heads × 128 head dim × 2 bytes (bf16)
    assert kv_bytes_per_token(QWEN3_4B, 2) == 2 * 36 * 8 * 128 * 2 == 147_456
    config = make_config("paper", **PAPER_4B_VOTING, device="cpu")
    r = rollout_estimate(config, QWEN3_4B, calls=[(10, 100, 50)])  # on CUDA (the default)
    decode_kv = 10 * (100 + 50) * 147_456
    # fp32 logits and the forward's bf16 ones; two bf16 output-layer copies (LoRA)
    decode = decode_kv + 10 * 151_936 * 8 + 2 * 151_936 * 2560 * 2
    # The prompt pass: the whole static cache, logits, activations, the (prompt × cache) mask
    prefill = (
        decode_kv + 10 * 151_936 * 6 + 10 * 100 * (4 * 2560 + 3 * 9728) * 2 + 10 * 100 * 150 * 3
    )
    assert max(decode, prefill) == r.total - r.weights
    assert r.kv_cache == decode_kv  # static: the prompt pass already holds every column
    assert r.activations == 2 * 151_936 * 2560 * 2  # the decode step is the peak here


def test_a_generation_call_is_a_stage_of_the_whole_group_or_rollout_batch():
    config = make_config("paper", **PAPER_4B_VOTING, rollout_batch=0, device="cpu")
    # 64 prompts × 8 samples × 3 voters; then one aggregator reading three 2,048-token answers
    assert generation_calls(config) == [(1536, 512, 2048), (512, 512 + 3 * 2048, 2048)]
    capped = make_config("paper", **PAPER_4B_VOTING, device="cpu")
    assert capped.rollout_batch == 32
    assert generation_calls(capped) == [(32, 512, 2048), (32, 512 + 3 * 2048, 2048)]
    per_agent = make_config(
        "paper", **PAPER_4B_VOTING, sharing="per_agent", rollout_batch=0, device="cpu"
    )
    assert generation_calls(per_agent)[0] == (512, 512, 2048)  # one voter per policy


def test_paper_voting_on_4b_lora_is_refused_for_its_rollout_unless_chunked():
    with pytest.raises(ConfigError) as caught:
        make_config("paper", **PAPER_4B_VOTING, rollout_batch=0)
    message = caught.value.errors["memory"]
    assert message.startswith("the rollout needs about 955 GiB")
    assert "512 sequences in one generation call" in message  # the aggregator's prefill
    assert "try rollout_batch=32 " in message and "the update needs" not in message
    config = make_config("paper", **PAPER_4B_VOTING)  # rollout_batch=32: admitted
    r = rollout_estimate(config, QWEN3_4B)
    assert 60 * 2**30 < r.total < 75 * 2**30 and r.sequences == 32


def test_full_per_role_4b_names_both_phases():
    with pytest.raises(ConfigError) as caught:
        make_config(
            "paper", **PAPER_4B_VOTING, finetune="full", sharing="per_role", rollout_batch=128
        )
    message = caught.value.errors["memory"]
    assert message.index("the rollout needs") < message.index("the update needs")


@pytest.mark.parametrize("finetune", ["lora", "full"])
@pytest.mark.parametrize("call", [(32, 48, 24), (32, 8, 60), (8, 200, 16)])
def test_the_rollout_estimate_is_within_a_quarter_of_the_measured_peak(finetune, call):
    config = make_config(
        workflow="voting",
        sharing="per_role",
        finetune=finetune,
        micro_batch_size=8,
        lora_r=8,
        max_new_tokens=24,
        lr=1e-3,
        warmup_steps=0,
    )
    policies = build(config)
    update_policies(policies, turns_for(config, 2), config, tokenizer_pad_id=0)  # AdamW state
    measured = measured_generate_peak(policies, *call)
    estimated = rollout_estimate(config, SHAPE, on_cuda=False, calls=[call]).total
    assert 0.75 <= estimated / measured <= 1.25, (estimated, measured)


def test_chunked_rollouts_sample_exactly_what_one_call_does():
    from trainer.models import load_model
    from trainer.rollout import Codec, FrozenPolicies, make_prompts, rollout
    from trainer.tasks import load_task

    whole = make_config("cpu-demo", workflow="voting")
    loaded = load_model(whole.model, "cpu")
    task = load_task(whole.task, whole.dataset, seed=0)
    problems = task.sample("train", 3, seed=7)
    results = {}
    for size in (0, 5, 1):
        config = make_config("cpu-demo", workflow="voting", rollout_batch=size)
        episodes, stats = rollout(
            problems,
            2,
            config=config,
            policies=FrozenPolicies(loaded.model),
            codec=Codec(loaded.tokenizer, add_bos=True),
            prompts=make_prompts(config, loaded.tokenizer, loaded.family),
            task=task,
            temperature=0.7,
            seed_parts=(0, "chunks"),
        )
        turns = [(t.agent, t.prompt_ids, t.completion_ids) for e in episodes for t in e.turns]
        logprobs = [p for e in episodes for t in e.turns for p in t.logprobs]
        results[size] = (turns, [e.reward for e in episodes], stats.generate_calls, logprobs)
    assert results[5][:2] == results[0][:2] == results[1][:2]  # every token, every reward
    # A chunk pads to its own longest prompt and runs smaller matrix products: the float32
    # log-probs agree to rounding (measured: at most 3e-6), not bit for bit.
    for size in (5, 1):
        assert results[size][3] == pytest.approx(results[0][3], abs=1e-5, rel=0)
    # 3 problems × 2 samples: 18 voter turns, then 6 aggregator turns
    assert [results[s][2] for s in (0, 5, 1)] == [2, 4 + 2, 18 + 6]


def test_old_configs_keep_their_hash():
    config = make_config("cpu-demo")
    assert config.hash() == "cdbf7e4c5a063149"  # as before rollout_batch existed
    other = config.__class__(**{**config.to_dict(), "rollout_batch": 4})
    assert other.hash() != config.hash()
