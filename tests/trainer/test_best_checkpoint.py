"""Keeping the peak: the best checkpoint by eval/accuracy beside the latest, resume-safe,
evaluable with `trainer eval --checkpoint best`; and `stop_after_cliff`.

Real training on the tiny model throughout. Where a test needs a given accuracy curve (a
crash after a new best, a cliff), evaluation is replaced by a scripted curve: a tiny model's
own accuracy is whatever its warm start makes it, and a cliff cannot be hoped for.
"""

from __future__ import annotations

import hashlib
import json

import pytest

import trainer.train
from tests.trainer.test_train import _cli, small
from trainer.checkpoint import checkpoint_root, read_best, restore_meta
from trainer.checkpoint_index import latest_step_checkpoint
from trainer.config import _LATER_FIELDS, ConfigError, make_config
from trainer.reporting import ListReporter
from trainer.stop_policy import cliff_stop_reason
from trainer.train import train


def scripted(monkeypatch, curve: dict[int, float], crash_at: int | None = None) -> list[int]:
    """Evaluations return `curve[step]`; the step is read off the calls' order (0, then each
    evaluating step), which the list returned records. `crash_at`: that evaluation raises."""
    seen: list[int] = []
    steps = sorted(curve)

    def evaluate(config, **kwargs):
        step = steps[len(seen)] if len(seen) < len(steps) else None
        if step == crash_at:
            raise RuntimeError(f"worker died at step {step}")
        seen.append(step)
        return {"accuracy": curve[step], "accuracy_se": 0.0, "per_problem": [], "roles": {}}

    monkeypatch.setattr(trainer.train, "evaluate", evaluate)
    return seen


def best_dirs(out) -> list[str]:
    return sorted(p.name for p in checkpoint_root(out).iterdir() if p.name.startswith("best-"))


def test_the_best_checkpoint_is_the_first_step_of_the_best_logged_accuracy(tmp_path):
    reporter = ListReporter()
    train(small(steps=4, eval_every=1), tmp_path, reporter)

    steps, accuracy = reporter.series("eval/accuracy")
    peak_step = steps[accuracy.index(max(accuracy))]  # the first step attaining the maximum
    best = read_best(tmp_path)
    assert best["step"] == peak_step
    assert best["accuracy"] == max(accuracy)
    assert best_dirs(tmp_path) == [f"best-{peak_step:06d}"]
    # Logged at every evaluation: the running best.
    logged_steps, logged_best = reporter.series("ckpt/best_step")
    assert logged_steps == steps and logged_best[-1] == peak_step
    assert reporter.series("ckpt/best_accuracy")[1][-1] == max(accuracy)


def test_a_better_evaluation_replaces_the_best_checkpoint(tmp_path, monkeypatch):
    scripted(monkeypatch, {0: 0.1, 1: 0.5, 2: 0.3, 3: 0.5, 4: 0.2})
    reporter = ListReporter()

    train(small(steps=4, eval_every=1), tmp_path, reporter)

    assert read_best(tmp_path) == {"step": 1, "accuracy": 0.5, "path": "best-000001"}
    assert reporter.series("ckpt/best_step") == ([0, 1, 2, 3, 4], [0, 1, 1, 1, 1])
    assert best_dirs(tmp_path) == ["best-000001"]


def test_a_resumed_run_knows_its_best_and_forgets_one_from_after_its_checkpoint(
    tmp_path, monkeypatch
):
    curve = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.9, 4: 0.4, 5: 0.5, 6: 0.6}
    config = small(steps=6, eval_every=1, checkpoint_every=2)
    scripted(monkeypatch, curve, crash_at=4)
    with pytest.raises(RuntimeError, match="died at step 4"):
        train(config, tmp_path, ListReporter())
    # Died after saving the step-3 best, with the step-2 checkpoint the newest.
    assert latest_step_checkpoint(tmp_path).step == 2
    assert read_best(tmp_path)["step"] == 3
    assert best_dirs(tmp_path) == ["best-000002", "best-000003"]

    known = restore_meta(tmp_path, latest_step_checkpoint(tmp_path).path)

    assert known == {
        "best": {"step": 2, "accuracy": 0.3, "path": "best-000002"},
        # (step, accuracy, SE): the stop policy's noise test needs the SE.
        "evals": [(0, 0.1, 0.0), (1, 0.2, 0.0), (2, 0.3, 0.0)],
    }
    assert read_best(tmp_path)["step"] == 2
    assert best_dirs(tmp_path) == ["best-000002"]

    seen = scripted(monkeypatch, {s: a for s, a in curve.items() if s > 2})
    reporter = ListReporter()
    assert train(config, tmp_path, reporter)["status"] == "succeeded"
    assert seen == [3, 4, 5, 6]  # steps 3 on, trained and evaluated again
    assert read_best(tmp_path) == {"step": 3, "accuracy": 0.9, "path": "best-000003"}
    assert reporter.series("ckpt/best_step") == ([3, 4, 5, 6], [3, 3, 3, 3])
    assert best_dirs(tmp_path) == ["best-000003"]


def test_cli_eval_evaluates_the_best_checkpoint_of_a_run_dir(tmp_path, monkeypatch):
    scripted(monkeypatch, {0: 0.1, 1: 0.7, 2: 0.2})
    train(small(steps=2, eval_every=1, eval_problems=4), tmp_path, ListReporter())

    done = _cli("eval", "--checkpoint", "best", "--out", str(tmp_path), "--problems", "4")

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["checkpoint_step"] == 1
    assert result["checkpoint"].endswith("checkpoints/best-000001")
    assert result["episodes"] == 4 * make_config("cpu-demo").eval_samples


def test_cli_eval_says_what_is_missing(tmp_path):
    done = _cli("eval", "--checkpoint", "best", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "config.json" in done.stderr
    (tmp_path / "config.json").write_text(json.dumps(small().to_dict()))
    done = _cli("eval", "--checkpoint", "best", "--out", str(tmp_path))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"error: {tmp_path} holds no best checkpoint yet (saved at evaluations)"
    )
    done = _cli("eval", "--workflow", "voting", "--checkpoint", "best", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "--workflow: with --out the config is the run's own config.json" in done.stderr


# The hand-built cliff: peak 0.7 at step 3, the line peak − θ = 0.45 crossed (smoothed) at
# step 5, confirmed by the fifth evaluation from there, step 9.
CLIFF = {s: a for s, a in enumerate([0.2, 0.4, 0.6, 0.7, 0.7, 0.3] + [0.2] * 8)}


def test_stop_after_cliff_ends_the_run_n_evaluations_after_a_confirmed_cliff(tmp_path, monkeypatch):
    scripted(monkeypatch, CLIFF)
    reporter = ListReporter()
    config = small(steps=13, eval_every=1, checkpoint_every=50, stop_after_cliff=2)

    result = train(config, tmp_path, reporter)

    assert result["status"] == "succeeded"
    assert result["step"] == 11  # evaluations 10 and 11 came after the confirmation at 9
    assert reporter.lines == [result["stopped"]]
    assert "cliff at step 5 was confirmed at step 9, 2 evaluations ago" in result["stopped"]
    assert reporter.checkpoints[-1][0] == 11  # a checkpoint to resume or branch from
    assert read_best(tmp_path)["step"] == 3


def test_without_stop_after_cliff_the_run_goes_on(tmp_path, monkeypatch):
    scripted(monkeypatch, CLIFF)
    reporter = ListReporter()

    result = train(small(steps=13, eval_every=1, checkpoint_every=50), tmp_path, reporter)

    assert result["step"] == 13 and "stopped" not in result
    assert reporter.lines == []


def test_cliff_stop_reason_waits_for_the_confirmation():
    evals = sorted(CLIFF.items())
    assert cliff_stop_reason(evals[:10], 1) is None  # confirmed at 9, nothing after yet
    assert cliff_stop_reason(evals[:11], 1).startswith("Stopping early (stop_after_cliff=1)")
    assert cliff_stop_reason(evals, 0) is None


def test_stop_after_cliff_is_validated_and_left_out_of_the_hash_when_off():
    with pytest.raises(ConfigError) as error:
        make_config("cpu-demo", stop_after_cliff=-1)
    assert error.value.errors == {"stop_after_cliff": "-1 must be at least 0"}
    off = make_config("cpu-demo", eval_samples=1)  # eval_samples off too
    later = tuple(_LATER_FIELDS)  # all at their defaults here (test_config_hash.py: golden)
    before = {k: v for k, v in off.to_dict().items() if k not in later}
    blob = json.dumps(before, sort_keys=True, separators=(",", ":")).encode()
    assert off.hash() == hashlib.sha256(blob).hexdigest()[:16]  # as before the field existed
    assert make_config("cpu-demo", stop_after_cliff=2).hash() != off.hash()
