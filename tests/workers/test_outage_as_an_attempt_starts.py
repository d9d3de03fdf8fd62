"""A database that goes away just as an attempt starts, while it deletes what an earlier
attempt stored past its checkpoint, delays the run instead of failing it: a resumed run
whose worker met a PostgreSQL restart there used to end "failed: OperationalError"."""

import pytest
from django.db import OperationalError

from tests.people import make_experiment
from tests.runs import ONE_STEP
from webapp.experiments.models import Run
from workers import execute

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_database_error_before_training_is_waited_out(alice, tiny_model, monkeypatch):
    deletes = []
    delete = execute.delete_points_from

    def restarting_once(run_id: int, step: int) -> None:
        deletes.append(step)
        if len(deletes) == 1:
            raise OperationalError("terminating connection due to administrator command")
        delete(run_id, step)

    monkeypatch.setattr(execute, "delete_points_from", restarting_once)
    run = make_experiment(alice, **ONE_STEP).runs.get()

    result = execute.train_run(execute.claim(run.id, "test@here", "task-1"))

    assert result["status"] == Run.SUCCEEDED
    assert deletes == [0, 0]
    done = Run.objects.get(id=run.id)
    assert done.status == Run.SUCCEEDED and done.step == 1
