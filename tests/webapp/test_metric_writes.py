"""`write_points`: idempotent on (run, key, step) on PostgreSQL (one INSERT … ON CONFLICT over
unnest) and on the embedded SQLite (bulk_create with update_conflicts)."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT, service_env
from webapp.experiments.models import MetricPoint
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def stored(run):
    return sorted(MetricPoint.objects.filter(run=run).values_list("key", "step", "value"))


def test_a_replayed_batch_stores_each_point_once(run):
    batch = [("train/reward", s, s / 10) for s in range(100)]

    assert write_points(run.id, batch) == 100
    assert write_points(run.id, batch) == 100

    assert MetricPoint.objects.filter(run=run).count() == 100


def test_a_rewritten_point_keeps_the_new_value_and_nan_becomes_missing(run):
    write_points(run.id, [("a", 1, 1.0), ("b", 1, 2.0)])

    write_points(run.id, [("a", 1, 5.0), ("b", 1, float("inf")), ("a", 1, 6.0)])

    assert stored(run) == [("a", 1, 6.0), ("b", 1, None)]


def test_an_empty_batch_writes_nothing(run):
    assert write_points(run.id, []) == 0


SQLITE_PROBE = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from webapp.metrics import write_points
from webapp.experiments.models import Experiment, MetricPoint, Run
experiment = Experiment.objects.create(owner=User.objects.create(username="a"), name="e")
run = Run.objects.create(experiment=experiment)
write_points(run.id, [("k", 1, 1.0), ("k", 2, 2.0)])
write_points(run.id, [("k", 1, 1.5), ("k", 2, 2.0), ("k", 3, None)])
print(sorted(MetricPoint.objects.values_list("key", "step", "value")))
"""


def test_writes_are_idempotent_on_the_embedded_sqlite_too(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SQLITE_PROBE],
        cwd=ROOT,
        env=service_env(
            DATABASE_URL=None,
            TROUPE_DATA_DIR=str(tmp_path),
            DJANGO_SETTINGS_MODULE="webapp.settings",
        ),
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[('k', 1, 1.5), ('k', 2, 2.0), ('k', 3, None)]"
