"""The vLLM rollout engine against the trainer's own model, with real vLLM on the CPU.

fp32 on the CPU, a randomly initialised tiny-m-shaped Qwen3 (head size 32: vLLM's CPU
attention serves it; tiny-s's 24 it does not), tied embeddings as every tiny model and Qwen3:
- the log-prob vLLM reports for each sampled token equals the trainer's (same temperature)
  within 1e-5, for every adapter of a mixed batch — which also proves each row ran under its
  own adapter — and greedy outputs equal the exact sampler's;
- after an update (adapters, or the full weights with the tied embedding changed) the engine
  follows the new weights: a stale adapter, output layer or prefix cache (a prompt longer
  than a KV block) would fail the same comparisons.

Marked `vllm`: they need the vLLM venv (`make vllm-venv`) and skip without it, except under
TROUPE_REQUIRE_SERVICES=1 (CI), where a missing venv fails.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.trainer.vllm_helpers import require_vllm, tiny_m_dir
from trainer.config import make_config
from trainer.engines.vllm_engine import VllmEngine
from trainer.loss import make_batch, token_logprobs
from trainer.policies import PolicySet
from trainer.routing import policy_names
from trainer.sampling import generate

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

EOS = [2]
PAD = 0
# The last is longer than a KV-cache block (128 tokens on the CPU): a prefix cached before an
# update must not be served after it.
PROMPTS = [[1, 17, 45, 9, 88], [1, 200, 3], [1, 5, 6, 7, 8, 9, 10, 11], [1, *range(3, 142)]]
TEMPERATURE = 0.7
TOLERANCE = 1e-5  # the bound, for the short prompts (observed up to ~5e-6)
# The 141-token prompt sums over more positions in attention (observed up to ~7e-6, varying
# from run to run with the threads' order of sums): it is there to catch a stale prefix cache,
# which is off by more than 1, so its bound leaves room.
LONG_TOLERANCE = 5e-5


def _config(model_dir, **overrides):
    values = dict(
        model=str(model_dir),
        workflow="voting",
        sharing="per_role",
        lora_r=8,
        lora_alpha=16,
        temperature=TEMPERATURE,
        micro_batch_size=8,
    )
    values.update(overrides)
    return make_config("cpu-demo", **values)


def _policies(model_dir, config) -> PolicySet:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return PolicySet(model, config, policy_names(config))


def _perturb(policies: PolicySet, name: str, seed: int, scale: float, only=None) -> None:
    """Move policy `name`'s trainable weights by seeded noise (what an update does)."""
    generator = torch.Generator().manual_seed(seed)
    named = policies._named(name)
    with torch.no_grad():
        for key, p in named.items():
            if only is None or only in key:
                p.add_(torch.randn(p.shape, generator=generator) * scale)


def _trainer_logprobs(policies, policy, sample, temperature):
    turn = _Turn(sample.prompt_ids, sample.completion_ids)
    batch = make_batch([turn], PAD)
    with policies.use(policy) as model, torch.no_grad():
        logps, _ = token_logprobs(
            model,
            batch.input_ids,
            batch.attention_mask,
            batch.completion_len,
            temperature,
            with_entropy=False,
        )
    return logps[0, : len(sample.completion_ids)]


class _Turn:
    def __init__(self, prompt_ids, completion_ids):
        self.prompt_ids = prompt_ids
        self.completion_ids = completion_ids
        self.logprobs = [0.0] * len(completion_ids)
        self.advantage = 0.0
        self.is_weights = None
        self.agent = "test"


def _greedy(policies, policy, budget=12):
    with policies.use(policy) as model:
        return generate(
            model,
            PROMPTS,
            seeds=[0] * len(PROMPTS),
            max_new_tokens=budget,
            temperature=0.0,
            eos_ids=EOS,
            pad_id=PAD,
        )


def _check_matches(engine, policies, names):
    """Sampled (T=0.7, one mixed batch) log-probs and greedy tokens equal the trainer's."""
    jobs = [
        (n, PROMPTS, [11 * k + i for k in range(len(PROMPTS))], [12] * 4)
        for i, n in enumerate(names)
    ]
    sampled = engine.generate_many(jobs, temperature=TEMPERATURE, eos_ids=EOS, pad_id=PAD)
    for name, samples in zip(names, sampled):
        for sample in samples:
            assert sample.completion_ids, "vLLM returned an empty completion"
            mine = _trainer_logprobs(policies, name, sample, TEMPERATURE)
            theirs = torch.tensor(sample.logprobs)
            gap = float((mine - theirs).abs().max())
            bound = TOLERANCE if len(sample.prompt_ids) < 100 else LONG_TOLERANCE
            assert gap < bound, f"{name}: log-prob gap {gap:.2e} on {sample}"
    greedy = engine.generate_many(
        [(n, PROMPTS, [0] * 4, [12] * 4) for n in names], temperature=0.0, eos_ids=EOS, pad_id=PAD
    )
    for name, samples in zip(names, greedy):
        exact = _greedy(policies, name)
        assert [s.completion_ids for s in samples] == [s.completion_ids for s in exact], name
        assert [s.truncated for s in samples] == [s.truncated for s in exact], name
    return greedy


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    require_vllm()
    return tiny_m_dir(tmp_path_factory.mktemp("tiny-m"))


@pytest.fixture(scope="module")
def lora_setup(model_dir, tmp_path_factory):
    config = _config(model_dir)
    policies = _policies(model_dir, config)
    assert len(policies.names) >= 2, policies.names
    for i, name in enumerate(policies.names):  # adapters that differ from the base and each other
        _perturb(policies, name, seed=100 + i, scale=0.05)
    engine = VllmEngine.start(
        config, policies, str(model_dir), log_dir=tmp_path_factory.mktemp("lora-log")
    )
    yield config, policies, engine
    engine.close()


def test_lora_mixed_batch_matches_the_trainer_per_adapter(lora_setup):
    config, policies, engine = lora_setup
    assert engine.startup_seconds > 0
    greedy = _check_matches(engine, policies, policies.names)
    # The adapters differ, so a row served by the wrong adapter could not have matched.
    outputs = [[s.completion_ids for s in samples] for samples in greedy]
    assert outputs[0] != outputs[1]


def test_lora_engine_follows_an_update_in_place(lora_setup):
    config, policies, engine = lora_setup
    name = policies.names[0]
    before = engine.generate(
        name,
        PROMPTS,
        seeds=[0] * 4,
        max_new_tokens=[12] * 4,
        temperature=0.0,
        eos_ids=EOS,
        pad_id=PAD,
    )
    _perturb(policies, name, seed=7, scale=0.05)
    engine.policies_changed([name])
    after = _check_matches(engine, policies, [name])[0]
    assert [s.completion_ids for s in after] != [s.completion_ids for s in before]
    # twice: the second reload of the same adapter id must also be taken
    _perturb(policies, name, seed=8, scale=0.05)
    engine.policies_changed([name])
    _check_matches(engine, policies, [name])


def test_full_weights_reload_refreshes_the_tied_output_layer(model_dir, tmp_path):
    # per_role: one engine per policy, both asked at once
    config = _config(model_dir, finetune="full")
    policies = _policies(model_dir, config)
    first, second = policies.names
    engine = VllmEngine.start(config, policies, str(model_dir), log_dir=tmp_path)
    processes = [d.process for d in engine.drivers.values()]
    assert len(set(processes)) == 2
    try:
        model = policies._models[first]
        assert model.lm_head.weight is model.model.embed_tokens.weight  # tied
        _check_matches(engine, policies, [first, second])
        # Only the (tied) embedding changes: a stale repacked output layer in vLLM would
        # still compute the old logits, and the log-probs would not match.
        _perturb(policies, first, seed=3, scale=0.05, only="embed_tokens")
        engine.policies_changed([first])
        _check_matches(engine, policies, [first, second])
        _perturb(policies, second, seed=4, scale=0.02)  # and every weight of the other
        engine.policies_changed([second])
        _check_matches(engine, policies, [first, second])
    finally:
        engine.close()
    assert engine.drivers == {}
    for process in processes:  # closed: the process (and its group) is gone
        assert process.poll() is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)


def test_a_seeded_batch_larger_than_one_prefill_chunk_samples(lora_setup):
    """128 seeded rows of 50-token prompts (6,400 prompt tokens: more than the CPU build's
    default 4,096 a step, so one prompt would be split) — a chunked prefill broke seeded
    sampling on the CPU build ("CPU Generator does not use offset")."""
    config, policies, engine = lora_setup
    generator = torch.Generator().manual_seed(5)
    prompts = [[1, *torch.randint(3, 320, (49,), generator=generator).tolist()] for _ in range(64)]
    jobs = [(n, prompts, list(range(64)), [4] * 64) for n in policies.names]
    out = engine.generate_many(jobs, temperature=TEMPERATURE, eos_ids=EOS, pad_id=PAD)
    assert [len(rows) for rows in out] == [64] * len(policies.names)
    assert all(1 <= len(s.completion_ids) <= 4 for rows in out for s in rows)
