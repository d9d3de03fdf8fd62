"""Row seeds: every part of a rollout's identity changes its sampling noise."""

from __future__ import annotations

import torch

from trainer.sampling import gumbel_noise, row_seed


def test_problem_ids_with_a_long_common_prefix_get_distinct_seeds():
    # The synthetic ids share their first 19 characters; a seed of the prefix alone gave
    # every problem of an evaluation the same noise, so one run's samples moved together.
    ids = [f"synthetic-math-test-{i}" for i in range(1000)]
    assert len({row_seed(0, "eval", problem, 0, "solver", 0) for problem in ids}) == 1000


def test_every_part_changes_the_seed_and_equal_parts_repeat_it():
    base = (3, "eval", "synthetic-math-test-7", 1, "generator2", 0)
    assert row_seed(*base) == row_seed(*base)
    for i in range(len(base)):
        other = list(base)
        other[i] = other[i] + 1 if isinstance(other[i], int) else other[i] + "x"
        assert row_seed(*other) != row_seed(*base), i


def test_noise_of_different_problems_is_uncorrelated():
    seeds = torch.tensor([row_seed(0, "eval", f"synthetic-math-test-{i}", 0) for i in range(400)])
    noise = gumbel_noise(seeds, position=3, vocab=64, device="cpu")
    first, second = noise[:200].flatten(), noise[200:].flatten()
    corr = torch.corrcoef(torch.stack([first, second]))[0, 1].item()
    assert abs(corr) < 0.05  # 12,800 pairs: independent noise stays well inside this
