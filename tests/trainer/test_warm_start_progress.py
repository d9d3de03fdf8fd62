"""What a run says before its first step: loading its model, a tiny model's warm start on
first use (minutes, so in percent, for the run page), the base-model evaluation."""

from __future__ import annotations

import re
import time

import pytest

from tests.trainer.quick import small
from trainer import tiny
from trainer.reporting import ListReporter
from trainer.train import train, warm_start_status


def quickest():
    """One step of one problem, two evaluation problems: the statuses are the point here."""
    return small(steps=1, prompts_per_step=1, eval_problems=2, eval_every=1, max_new_tokens=4)


@pytest.fixture
def short_recipe(tmp_path, monkeypatch):
    """A data directory of its own and a four-step warm start: a tiny-s that is not built
    yet, built in seconds (its cache key differs from the real recipe's, so it is never
    mistaken for the real model)."""
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setitem(tiny.RECIPE, "sft_steps", {**tiny.RECIPE["sft_steps"], "tiny-s": 4})
    monkeypatch.setitem(tiny.RECIPE, "problems_per_task", 100)
    # The corpus and its digest are cached a process: drop the real recipe's before and the
    # short one's after, or a later test would look for (and build) a model under this key.
    tiny.warm_start_corpus.cache_clear()
    tiny.corpus_digest.cache_clear()
    yield
    tiny.warm_start_corpus.cache_clear()
    tiny.corpus_digest.cache_clear()


def test_a_first_run_reports_the_warm_start_in_percent_then_reuses_the_model(
    tmp_path, short_recipe
):
    first = ListReporter()
    train(quickest(), tmp_path / "first", first)

    assert [re.sub(r" \([^()]* elapsed[^()]*\)$", "", status) for status in first.statuses] == [
        "Loading model tiny-s",
        "Preparing model tiny-s: warm start 25%",
        "Preparing model tiny-s: warm start 50%",
        "Preparing model tiny-s: warm start 75%",
        "Preparing model tiny-s: warm start 100%",
        "Evaluating the base model (step 0)",
        "",  # the steps begin
    ]
    assert re.search(r"warm start 25% \(\d+s elapsed, about \d+s left\)$", first.statuses[1])
    assert (tiny.model_dir("tiny-s") / "done").exists()

    second = ListReporter()
    train(quickest(), tmp_path / "second", second)
    assert second.statuses == ["Loading model tiny-s", "Evaluating the base model (step 0)", ""]


def test_a_warm_start_is_reported_once_per_whole_percent():
    reporter = ListReporter()
    progress = warm_start_status(reporter, "tiny-m")

    for done in range(1, 1201):
        progress(done, 1200)

    assert len(reporter.statuses) == 101  # 0% (the first 11 steps) to 100%
    assert reporter.statuses[0].startswith("Preparing model tiny-m: warm start 0% (")
    assert "left" not in reporter.statuses[0]  # no estimate from the set-up's pace
    assert "left)" in reporter.statuses[1]
    assert reporter.statuses[-1].startswith("Preparing model tiny-m: warm start 100% (")


def test_the_warm_start_shows_the_time_spent_and_an_estimate_of_the_time_left():
    reporter = ListReporter()
    now = [0.0]
    progress = warm_start_status(reporter, "tiny-s", clock=lambda: now[0])

    now[0] = 144.0  # 40% in 2m 24s: 3m 36s to go at that pace
    progress(1200, 3000)
    now[0] = 300.0
    progress(3000, 3000)

    assert reporter.statuses == [
        "Preparing model tiny-s: warm start 40% (2m 24s elapsed, about 3m 36s left)",
        "Preparing model tiny-s: warm start 100% (5m 00s elapsed)",
    ]


class CancelInWarmStart(ListReporter):
    """Cancels as soon as the warm start has begun, as a user pressing Cancel would."""

    def should_stop(self) -> bool:
        return any("warm start" in status for status in self.statuses)


def test_a_cancel_during_the_warm_start_stops_it_within_seconds(
    tmp_path, short_recipe, monkeypatch
):
    monkeypatch.setitem(tiny.RECIPE, "sft_steps", {**tiny.RECIPE["sft_steps"], "tiny-s": 100_000})
    monkeypatch.setattr("trainer.train.STOP_CHECK_SECONDS", 0.0)  # ask at every warm-start step
    reporter = CancelInWarmStart()

    started = time.monotonic()
    result = train(quickest(), tmp_path / "run", reporter)

    assert result["status"] == "cancelled" and result["step"] == 0
    assert time.monotonic() - started < 120  # 100,000 steps would take hours
    assert not (tiny.model_dir("tiny-s") / "done").exists()  # nothing half-built is kept
    assert not [p for p in tiny.model_dir("tiny-s").parent.iterdir() if p.is_dir()]
    assert reporter.points == []  # never evaluated, never trained


def test_a_slow_first_percent_still_says_how_long_is_left():
    # Once, on a busy machine, the line stayed at "0% (21s elapsed)" and never estimated.
    reporter = ListReporter()
    now = [0.0]
    progress = warm_start_status(reporter, "tiny-m", clock=lambda: now[0])

    now[0] = 20.0  # the set-up took 20 s before the first step
    progress(1, 1200)
    now[0] = 26.0  # 3 more steps in 6 s: 2 s a step, 1,196 steps to go
    progress(4, 1200)

    assert reporter.statuses == [
        "Preparing model tiny-m: warm start 0% (20s elapsed)",
        "Preparing model tiny-m: warm start 0% (26s elapsed, about 39m 52s left)",
    ]
