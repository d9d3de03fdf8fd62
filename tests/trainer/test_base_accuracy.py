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
    # At the rollout temperature: what GRPO needs is a base that is sometimes right when it
    # samples. Greedy math accuracy is near 0 by design (the warm start boxes a summed answer
    # only 45% of the time, so greedy decoding never does: the habit the demo's RL learns).
    config = make_config("cpu-demo", workflow=workflow, task=task_name)
    config = make_config("cpu-demo", workflow=workflow, task=task_name,
                         eval_temperature=config.temperature)  # fmt: skip
    task = load_task(task_name)
    return evaluate(
        config,
        policies=FrozenPolicies(tiny.model),
        codec=Codec(tiny.tokenizer, add_bos=True),
        prompts=make_prompts(config, tiny.tokenizer, tiny.family),
        task=task,
        problems=held_out(task, 128),
    )


@pytest.mark.parametrize("task_name", ["math", "code"])
@pytest.mark.parametrize("workflow", ["single", "voting", "eval_opt", "orch_workers"])
def test_base_accuracy_is_strictly_between_2_and_95_percent(tiny, workflow, task_name):
    # 2%, not 5%: sampled Orch-Workers math scores about 4% (three agents must all be right,
    # and the synthesizer boxes a sum under half the time); 128 problems keep 2% clear of 0.
    result = _base_accuracy(tiny, workflow, task_name)
    assert 0.02 < result["accuracy"] < 0.95, result
    assert result["episodes"] == 128


def test_the_same_seed_gives_the_same_numbers(tiny):
    first = _base_accuracy(tiny, "voting", "math")
    second = _base_accuracy(tiny, "voting", "math")
    assert {k: v for k, v in first.items() if k != "seconds"} == {
        k: v for k, v in second.items() if k != "seconds"
    }
