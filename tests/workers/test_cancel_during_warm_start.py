"""A run cancelled while its tiny model warm-starts (a worker's first run on a data directory:
minutes on two cores) ends cancelled within seconds, through the database as a worker sees
it: the cancel button's flag, the reporter's `should_stop`, the run's outcome."""

import threading
import time

import pytest
from django.db import connection

from tests.people import make_experiment
from tests.runs import ONE_STEP
from tests.trainer.test_warm_start_progress import short_recipe  # noqa: F401
from trainer import tiny
from webapp.experiments.models import Run
from webapp.runs.queueing import cancel_run
from workers.execute import claim, train_run

pytestmark = pytest.mark.django_db(transaction=True)


def _cancel_once_warm_starting(run_id: int, pressed: list[float]) -> None:
    """Press Cancel as soon as the run's page would say it is warm-starting."""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run = Run.objects.get(id=run_id)
            if "warm start" in run.phase:
                pressed.append(time.monotonic())
                cancel_run(run)
                return
            time.sleep(0.1)
    finally:
        connection.close()  # this thread's own connection


def test_a_cancel_during_the_warm_start_ends_the_run_within_seconds(
    alice,
    settings,
    tmp_path,
    short_recipe,  # noqa: F811
    monkeypatch,
):
    settings.DATA_DIR = tmp_path / "worker"
    settings.TROUPE_HEARTBEAT_SECONDS = 0.5  # the phase reaches the database quickly
    # A warm start of 100,000 steps: hours, unless the cancel is honoured.
    monkeypatch.setitem(tiny.RECIPE, "sft_steps", {**tiny.RECIPE["sft_steps"], "tiny-s": 100_000})
    run = make_experiment(alice, **ONE_STEP).runs.get()
    claimed = claim(run.id, "test@here", "task-1")
    pressed: list[float] = []
    canceller = threading.Thread(target=_cancel_once_warm_starting, args=(run.id, pressed))
    canceller.start()

    result = train_run(claimed)
    ended = time.monotonic()
    canceller.join()

    assert pressed, "the run never said it was warm-starting"
    assert result["status"] == Run.CANCELLED
    assert ended - pressed[0] < 30  # the check runs every second; the rest is slack for CI
    done = Run.objects.get(id=run.id)
    assert done.status == Run.CANCELLED and done.phase == ""
    assert not (tiny.model_dir("tiny-s") / "done").exists()
