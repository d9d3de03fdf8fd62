"""webapp/tracking/keymap.py: other frameworks' metric keys onto Troupe's (docs/design.md §5)."""

import pytest

from webapp.tracking.keymap import accuracy_source, aliases, map_points, troupe_key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # the study's fork of verl: per-role metrics
        ("actor/generator/grad_norm", "role/generator/grad_norm"),
        ("actor/aggregator/kl", "role/aggregator/kl"),
        ("actor/evaluator/kl_loss", "role/evaluator/kl"),
        ("actor/orchestrator/pg_loss", "role/orchestrator/pg_loss"),
        ("actor/generator/pg_clipfrac", "role/generator/clip_frac"),
        # MARTI: per agent
        ("train/agent_2/grad_norm", "agent/agent2/grad_norm"),
        ("train/agent_0/policy_loss", "agent/agent0/pg_loss"),
        # verl with one policy, TRL, the Hugging Face Trainer
        ("actor/pg_loss", "train/loss"),
        ("actor/pg_clipfrac", "train/clip_frac"),
        ("critic/score/mean", "train/reward"),
        ("loss", "train/loss"),
        ("reward_std", "train/reward_std"),
        ("frac_reward_zero_std", "train/frac_zero_std"),
        ("completions/mean_length", "train/resp_len"),
        # not recognised, or already Troupe's
        ("actor/generator/lr", None),
        ("actor/grad_norm", None),
        ("role/generator/grad_norm", None),
        ("train/reward", None),
        ("learning_rate", None),
    ],
)
def test_known_keys_map_to_troupe_names(key, expected):
    assert troupe_key(key) == expected


def test_the_accuracy_key_is_the_named_one_else_the_best_pass_at_1_like_key():
    keys = ["val-core/math/reward/mean_at_1", "val-core/math/acc/mean_at_1", "train/loss"]
    assert accuracy_source(keys) == "val-core/math/acc/mean_at_1"
    assert accuracy_source(["val/math/pass@1", *keys]) == "val/math/pass@1"
    assert accuracy_source(["val/code/pass_at_1", "val/math/pass_at_1"]) == "val/code/pass_at_1"
    assert accuracy_source(keys, named="val-core/math/reward/mean_at_1") == keys[0]
    assert accuracy_source(keys, named="not/logged") is None
    assert accuracy_source(["eval/accuracy", *keys]) is None  # the run logs Troupe's own
    assert accuracy_source(["val/loss", "train/acc"]) is None


def test_points_keep_their_original_key_and_gain_the_troupe_one():
    points = [("actor/generator/grad_norm", 3, 0.5), ("val/math/pass@1", 3, 0.25), ("x", 3, 1.0)]

    mapped = map_points(points, accuracy_key="val/math/pass@1")

    assert mapped == [
        *points,
        ("role/generator/grad_norm", 3, 0.5),
        ("eval/accuracy", 3, 0.25),
    ]


def test_a_troupe_key_logged_directly_is_not_overwritten_by_an_alias():
    keys = ["actor/generator/grad_norm", "role/generator/grad_norm", "loss"]
    assert aliases(keys) == {"loss": "train/loss"}
