"""Sampled held-out evaluation (`eval_samples` k at `eval_temperature`): accuracy is the mean
over k × n episodes, its standard error treats the problem as the unit, and a run records
each evaluation's per-problem accuracies for paired comparisons."""

from __future__ import annotations

import hashlib
import json
import math
import statistics

import pytest

from tests.trainer.test_train import small
from trainer.config import _LATER_FIELDS, ConfigError, make_config
from trainer.evaluate import PER_PROBLEM_FILE, evaluate, held_out
from trainer.models import load_model
from trainer.reporting import ListReporter
from trainer.rollout import Codec, FrozenPolicies, make_prompts
from trainer.tasks import load_task
from trainer.train import train


def test_eval_samples_is_validated_and_left_out_of_the_hash_at_its_default():
    with pytest.raises(ConfigError) as error:
        make_config("cpu-demo", eval_samples=0)
    assert error.value.errors == {"eval_samples": "0 must be at least 1"}
    one = make_config("cpu-demo", eval_samples=1)
    later = tuple(_LATER_FIELDS)  # all at their defaults here (test_config_hash.py: golden)
    before = {k: v for k, v in one.to_dict().items() if k not in later}
    blob = json.dumps(before, sort_keys=True, separators=(",", ":")).encode()
    assert one.hash() == hashlib.sha256(blob).hexdigest()[:16]  # as before the field existed
    assert make_config("cpu-demo", eval_samples=2).hash() != one.hash()


def test_k_samples_per_problem_give_the_mean_and_a_per_problem_standard_error():
    tiny = load_model("tiny-s", "cpu")
    config = make_config("cpu-demo", eval_temperature=0.7, eval_samples=3)
    task = load_task("math")
    problems = held_out(task, 16)
    env = dict(
        policies=FrozenPolicies(tiny.model),
        codec=Codec(tiny.tokenizer, add_bos=True),
        prompts=make_prompts(config, tiny.tokenizer, tiny.family),
        task=task,
        problems=problems,
    )
    # batch_size 5 splits the problems over several generate calls (one problem's k samples
    # stay together), as a large eval set is split
    result = evaluate(config, batch_size=5, **env)
    assert result["episodes"] == 48
    per_problem = result["per_problem"]
    assert len(per_problem) == 16
    assert all(round(3 * a) == pytest.approx(3 * a) for a in per_problem)  # k/3 each
    assert result["accuracy"] == pytest.approx(statistics.fmean(per_problem))
    assert result["accuracy_se"] == pytest.approx(statistics.stdev(per_problem) / math.sqrt(16))
    # Seeds depend on (problem, sample), not on how the problems are batched.
    again = evaluate(config, batch_size=48, **env)
    assert again["per_problem"] == per_problem


def test_a_run_records_each_evaluation_per_problem(tmp_path):
    reporter = ListReporter()
    config = small(steps=2, eval_every=1, eval_samples=2, eval_temperature=0.7)
    train(config, tmp_path, reporter)
    lines = [json.loads(line) for line in (tmp_path / PER_PROBLEM_FILE).read_text().splitlines()]
    assert [row["step"] for row in lines] == [0, 1, 2]
    steps, accuracy = reporter.series("eval/accuracy")
    _, se = reporter.series("eval/accuracy_se")
    for row, acc, err in zip(lines, accuracy, se):
        assert len(row["per_problem"]) == config.eval_problems
        assert acc == pytest.approx(statistics.fmean(row["per_problem"]))
        assert err == pytest.approx(statistics.stdev(row["per_problem"]) / math.sqrt(8))
