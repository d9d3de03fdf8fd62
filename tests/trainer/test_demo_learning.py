"""A few GRPO steps of the cpu-demo raise held-out accuracy by far more than evaluation noise.

The warm-started tiny model boxes a final math answer only half the time (a half-learned
format habit, `trainer/transcripts/`); a habit belongs to no problem, so what RL on the
training problems teaches about it carries over to problems it never saw. The gain is judged
on the same held-out problems before and after (each evaluation samples every problem
`eval_samples` times, with the same seeds), against the paired noise: a 99.9% bootstrap
interval over problems of the per-problem gains must lie above 0, and the gain must be at
least 0.03. At 256 problems a run that learned nothing passes that about once in a thousand;
the runs measured for BENCHMARKS.md gained 0.085-0.22 (3 seeds of each workflow).
"""

from __future__ import annotations

import pytest

from analysis.stats import bootstrap_mean_ci
from trainer.config import make_config
from trainer.evaluate import held_out, read_per_problem
from trainer.reporting import ListReporter
from trainer.tasks import load_task
from trainer.train import sample_problems, train

STEPS = 30


@pytest.mark.timeout(1200)
def test_thirty_cpu_demo_steps_raise_held_out_accuracy_beyond_noise(tmp_path):
    config = make_config(
        "cpu-demo", workflow="single", seed=0, steps=STEPS, eval_every=STEPS, checkpoint_every=100
    )
    n = config.eval_problems
    assert n >= 256 and config.eval_samples >= 4, "too little evaluation to tell learning apart"

    # Held out for real: no evaluation problem is among the problems the run trains on.
    task = load_task(config.task, config.dataset)
    evaluated = {p.compact for p in held_out(task, n)}
    assert len(evaluated) == n
    trained = {
        p.compact
        for step in range(1, STEPS + 1)
        for p in sample_problems(task, config.prompts_per_step, config.seed, step)
    }
    assert not trained & evaluated

    assert train(config, tmp_path, ListReporter())["status"] == "succeeded"
    per_problem = read_per_problem(tmp_path)
    gains = [
        after - before for before, after in zip(per_problem[0], per_problem[STEPS], strict=True)
    ]
    gain = bootstrap_mean_ci(gains, level=0.999)
    assert gain.low > 0 and gain.mean >= 0.03, gain
