"""A run goes back to the queue only for the workers' own `RankLost` (a child rank died),
recognised by its class, not by its name: another error that happens to be called RankLost
fails the run like any error (workers/execute.py)."""

import pytest

import trainer.config
import workers.ranks
from webapp.experiments.models import Run
from workers import execute

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


class RankLost(RuntimeError):  # noqa: N818 - the name is the point: not workers.ranks'
    """Someone else's error of the same name."""


def fail_with(monkeypatch, error: Exception) -> None:
    def config_from_dict(data):
        raise error

    monkeypatch.setattr(trainer.config, "config_from_dict", config_from_dict)


def test_another_error_named_rank_lost_fails_the_run(run, monkeypatch):
    fail_with(monkeypatch, RankLost("not ours"))

    result = execute.train_run(execute.claim(run.id, "cpu@a", "t1"))

    assert result["status"] == Run.FAILED
    assert Run.objects.get(id=run.id).error_type == "RankLost"


def test_the_workers_rank_lost_leaves_the_run_to_the_sweep(run, monkeypatch):
    fail_with(monkeypatch, workers.ranks.RankLost("rank 1 exited with -9"))

    result = execute.train_run(execute.claim(run.id, "cpu@a", "t1"))

    assert result["status"] == "lost"
    assert Run.objects.get(id=run.id).status == Run.RUNNING  # the sweep queues it again
