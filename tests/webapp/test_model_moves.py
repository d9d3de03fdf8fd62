"""Models that moved between apps keep their tables and rows: the metric store's own tables
(tracking → metrics) and the rows MLflow adds to an experiment and a run (tracking →
experiments). Rows written under the old apps' state read back, unchanged, through the new
models once the migrations have run, and the database is what the models say it is."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from webapp.experiments.models import TrackedExperiment, TrackedRun
from webapp.metrics.models import EarlierPoint, PointSign, PointTime, StepTime

BEFORE = [
    ("tracking", "0010_trackedrun_cut"),
    ("experiments", "0011_init_from_relative_to_data_dir"),
]


def write_old_rows(apps, owner_id: int) -> int:
    experiment = apps.get_model("experiments", "Experiment").objects.create(
        owner_id=owner_id, name="moved"
    )
    run = apps.get_model("experiments", "Run").objects.create(
        experiment=experiment, name="r", config={}
    )
    old = {name: apps.get_model("tracking", name) for name in ("StepTime", "PointTime")}
    old["StepTime"].objects.create(run=run, step=1, timestamp=11)
    old["PointTime"].objects.create(run=run, key="loss", step=1, timestamp=12)
    apps.get_model("tracking", "PointSign").objects.create(run=run, key="loss", step=2, sign=-1)
    apps.get_model("tracking", "EarlierPoint").objects.create(
        run=run, key="loss", step=1, timestamp=10, value=0.5
    )
    apps.get_model("tracking", "TrackedRun").objects.create(run=run, uuid="a" * 32, tags={"t": 1})
    apps.get_model("tracking", "TrackedExperiment").objects.create(
        experiment=experiment, owner_id=owner_id, name="moved"
    )
    return run.id


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_moves_read_back_through_the_moved_models(alice):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    run_id = write_old_rows(executor.loader.project_state(BEFORE).apps, alice.id)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert list(StepTime.objects.values_list("run_id", "step", "timestamp")) == [(run_id, 1, 11)]
    assert list(PointTime.objects.values_list("key", "timestamp")) == [("loss", 12)]
    assert list(PointSign.objects.values_list("step", "sign")) == [(2, -1)]
    assert list(EarlierPoint.objects.values_list("timestamp", "value")) == [(10, 0.5)]
    assert TrackedRun.objects.get().tags == {"t": 1}
    assert TrackedExperiment.objects.get().name == "moved"
    EarlierPoint.objects.create(run_id=run_id, key="loss", step=1, timestamp=9, value=0.25)
    assert EarlierPoint.objects.count() == 2
