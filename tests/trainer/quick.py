"""Configs that make a `cpu-demo` run on tiny-s take seconds, shared by the trainer's tests."""

from __future__ import annotations

from trainer.config import Config, make_config

SMALL = dict(
    steps=4,
    prompts_per_step=2,
    group_size=2,
    eval_problems=8,
    eval_every=2,
    checkpoint_every=2,
    max_new_tokens=20,
)


def small(**overrides) -> Config:
    """The cpu-demo preset cut down to SMALL, then `overrides`."""
    return make_config("cpu-demo", **{**SMALL, **overrides})
