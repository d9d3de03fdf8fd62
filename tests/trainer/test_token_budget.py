"""`micro_batch_tokens: -1`: the largest packed pass the GPU's memory allows, from the estimate."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.config import ConfigError, make_config
from trainer.memory import (
    AUTO_TOKENS,
    HEADROOM,
    MAX_TOKEN_BUDGET,
    TOKEN_STEP,
    estimate,
    largest_token_budget,
    longest_sequence,
    model_shape,
)

GIB = 2**30
FULL = dict(model="Qwen/Qwen3-1.7B", finetune="full", sharing="per_role", workflow="voting")


def _fits(config, tokens: int, capacity: float) -> bool:
    candidate = dataclasses.replace(config, micro_batch_tokens=tokens)
    return estimate(candidate, model_shape(config.model)).total <= capacity * HEADROOM


@pytest.mark.parametrize("gib", [80, 141])
def test_the_budget_is_the_largest_step_that_fits(gib):
    config = make_config("paper", **FULL, micro_batch_tokens=-1)
    budget = largest_token_budget(config, capacity=gib * GIB)
    assert budget % TOKEN_STEP == 0 and budget <= MAX_TOKEN_BUDGET
    assert _fits(config, budget, gib * GIB)
    if budget < MAX_TOKEN_BUDGET:
        assert not _fits(config, budget + TOKEN_STEP, gib * GIB)


def test_where_not_even_the_longest_turn_fits_it_is_the_longest_turn():
    config = make_config("paper", **FULL, micro_batch_tokens=-1)
    longest = sum(longest_sequence(config))
    assert not _fits(config, longest, 24 * GIB)
    assert largest_token_budget(config, capacity=24 * GIB) == longest


def test_a_bigger_gpu_gets_a_bigger_budget_and_the_config_resolves_it(monkeypatch):
    config = make_config("paper", **FULL, micro_batch_tokens=-1)
    small = largest_token_budget(config, capacity=80 * GIB)
    big = largest_token_budget(config, capacity=141 * GIB)
    assert small < big
    monkeypatch.setenv("TROUPE_GPU_MEMORY_GB", "80")
    assert config.token_budget == small
    # The estimate of the auto config is that of its resolved budget.
    resolved = dataclasses.replace(config, micro_batch_tokens=small)
    shape = model_shape(config.model)
    assert estimate(config, shape).total == estimate(resolved, shape).total


def test_without_a_gpu_to_size_for_the_budget_is_the_default():
    assert make_config(micro_batch_tokens=-1, device="cpu").token_budget == AUTO_TOKENS
    assert make_config(micro_batch_tokens=-1).token_budget == AUTO_TOKENS  # tiny: no known shape
    assert make_config(micro_batch_tokens=0).token_budget == 0
    assert make_config(micro_batch_tokens=512).token_budget == 512


def test_below_minus_one_is_refused_with_the_field_named():
    with pytest.raises(ConfigError) as caught:
        make_config(micro_batch_tokens=-2)
    assert "micro_batch_tokens" in caught.value.errors
