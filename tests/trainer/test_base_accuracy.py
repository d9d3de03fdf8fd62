"""The warm-started tiny model is a usable, imperfect base for every workflow and task."""

from __future__ import annotations

import pytest

from trainer.config import make_config
from trainer.evaluate import evaluate, held_out
from trainer.models import load_model
from trainer.rollout import Codec, FrozenPolicies, make_prompts
from trainer.tasks import load_task


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-s", "cpu")


def _base_accuracy(tiny, workflow: str, task_name: str) -> dict:
    # greedy, one sample a problem: the base model's own answers
    config = make_config(
        "cpu-demo", workflow=workflow, task=task_name, eval_temperature=0.0, eval_samples=1
    )
    task = load_task(task_name)
    return evaluate(
        config,
        policies=FrozenPolicies(tiny.model),
        codec=Codec(tiny.tokenizer, add_bos=True),
        prompts=make_prompts(config, tiny.tokenizer, tiny.family),
        task=task,
        problems=held_out(task, 48),
    )


@pytest.mark.parametrize("task_name", ["math", "code"])
@pytest.mark.parametrize("workflow", ["single", "voting", "eval_opt", "orch_workers"])
def test_base_accuracy_is_strictly_between_5_and_95_percent(tiny, workflow, task_name):
    result = _base_accuracy(tiny, workflow, task_name)
    assert 0.05 < result["accuracy"] < 0.95, result
    assert result["episodes"] == 48


def test_the_same_seed_gives_the_same_numbers(tiny):
    first = _base_accuracy(tiny, "voting", "math")
    second = _base_accuracy(tiny, "voting", "math")
    assert {k: v for k, v in first.items() if k != "seconds"} == {
        k: v for k, v in second.items() if k != "seconds"
    }
