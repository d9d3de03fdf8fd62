"""A few GRPO steps of the cpu-demo raise held-out accuracy by far more than evaluation noise.

The warm-started tiny model boxes a summed answer only part of the time (a half-learned format
habit, `trainer/transcripts.py`), so greedy decoding leaves multi-term answers unboxed and the
base model's held-out accuracy is low; RL on training problems teaches the habit, which
carries over to problems it never saw. The margin asked for is several times the binomial
noise of one evaluation on `eval_problems` distinct held-out problems, so a lucky evaluation
cannot pass it, and it leaves room for the small weight differences of other thread counts.
"""

from __future__ import annotations

import math

import pytest

from trainer.config import make_config
from trainer.evaluate import held_out
from trainer.reporting import ListReporter
from trainer.tasks import load_task
from trainer.train import sample_problems, train

STEPS = 20


@pytest.mark.timeout(900)
def test_a_few_cpu_demo_steps_raise_held_out_accuracy(tmp_path):
    config = make_config(
        "cpu-demo", workflow="single", seed=0, steps=STEPS, eval_every=STEPS, checkpoint_every=50
    )
    n = config.eval_problems
    assert n >= 256, "too few evaluation problems to tell learning from noise"

    # Held out for real: no evaluation problem is among the problems the run trains on.
    task = load_task(config.task, config.dataset)
    evaluated = held_out(task, n)
    assert len({p.compact for p in evaluated}) == n
    trained = {
        p.compact
        for step in range(1, STEPS + 1)
        for p in sample_problems(task, config.prompts_per_step, config.seed, step)
    }
    assert not trained & {p.compact for p in evaluated}

    reporter = ListReporter()
    assert train(config, tmp_path, reporter)["status"] == "succeeded"
    accuracy = {step: v for step, key, v in reporter.points if key == "eval/accuracy"}
    base, final = accuracy[0], accuracy[STEPS]
    # 95% binomial half-width of one evaluation at the base accuracy (floored at 1/n so a base
    # of 0 still asks for a real margin); two evaluations differ within sqrt(2) of it.
    p = max(base, 1 / n)
    band = 1.96 * math.sqrt(p * (1 - p) / n)
    assert final - base > max(0.06, 4 * math.sqrt(2) * band), (base, final, band)
