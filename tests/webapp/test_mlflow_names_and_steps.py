"""MLflow names and steps, request by request: an MLflow experiment's name is unique per
owner in the database itself (not only by a check before the insert), and system metrics are
stored but never move a run's step or progress."""

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from tests.people import bearer
from webapp.experiments.models import Experiment, MetricPoint, Run, TrackedExperiment

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"


def post(client, user, endpoint, body):
    return client.post(
        API + endpoint, json.dumps(body), content_type="application/json", headers=bearer(user)
    )


def test_the_database_refuses_a_second_experiment_holding_one_owners_name(alice, bob):
    first = Experiment.objects.create(owner=alice, name="grpo")
    TrackedExperiment.objects.create(experiment=first, owner=alice, name="grpo")
    second = Experiment.objects.create(owner=alice, name="grpo")
    with pytest.raises(IntegrityError), transaction.atomic():
        TrackedExperiment.objects.create(experiment=second, owner=alice, name="grpo")
    bobs = Experiment.objects.create(owner=bob, name="grpo")
    TrackedExperiment.objects.create(experiment=bobs, owner=bob, name="grpo")  # his own


def test_created_experiments_hold_their_name_and_a_second_create_is_refused(client, alice):
    created = post(client, alice, "experiments/create", {"name": "grpo"})
    assert created.status_code == 200
    tracked = TrackedExperiment.objects.get(experiment_id=created.json()["experiment_id"])
    assert (tracked.owner, tracked.name) == (alice, "grpo")

    again = post(client, alice, "experiments/create", {"name": "grpo"})
    assert again.status_code == 400 and again.json()["error_code"] == "RESOURCE_ALREADY_EXISTS"
    assert Experiment.objects.filter(name="grpo").count() == 1


def test_an_experiment_made_on_troupes_api_holds_its_name_for_mlflow(client, alice):
    def made(name):
        response = client.post(
            "/api/v1/experiments",
            json.dumps({"name": name, "config": {}}),
            content_type="application/json",
            headers=bearer(alice),
        )
        assert response.status_code == 201, response.content
        return response.json()["id"]

    first = made("sweep")
    again = post(client, alice, "experiments/create", {"name": "sweep"})
    assert again.status_code == 400 and again.json()["error_code"] == "RESOURCE_ALREADY_EXISTS"
    second = made("sweep")  # Troupe's pages allow it; MLflow keeps finding the first
    found = client.get(
        API + "experiments/get-by-name", {"experiment_name": "sweep"}, headers=bearer(alice)
    )
    assert found.json()["experiment"]["experiment_id"] == str(first)
    holders = TrackedExperiment.objects.filter(owner=alice, name="sweep")
    assert list(holders.values_list("experiment_id", flat=True)) == [first]
    assert TrackedExperiment.objects.get(experiment_id=second).name is None


def test_system_metrics_are_stored_but_only_training_keys_move_the_step(client, alice):
    run = post(client, alice, "runs/create", {"experiment_id": "0"}).json()["run"]
    run_id = run["info"]["run_id"]
    post(client, alice, "runs/log-parameter", {"run_id": run_id, "key": "max_steps", "value": "10"})
    batch = [{"key": "loss", "value": 1.0, "timestamp": 1, "step": 1}] + [
        {"key": "system/cpu_utilization_percentage", "value": 5.0, "timestamp": 1, "step": s}
        for s in range(8)
    ]
    assert (
        post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": batch}).status_code
        == 200
    )
    only_system = [
        {"key": "system/gpu_0_utilization_percentage", "value": 9.0, "timestamp": 2, "step": 9}
    ]
    assert (
        post(
            client, alice, "runs/log-batch", {"run_id": run_id, "metrics": only_system}
        ).status_code
        == 200
    )

    troupe = Run.objects.get()
    assert troupe.step == 1 and troupe.progress == 0.1
    assert MetricPoint.objects.filter(run=troupe, key__startswith="system/").count() == 9


@pytest.mark.django_db(transaction=True)
def test_the_migration_leaves_the_oldest_of_duplicate_names_holding_it(alice):
    """Databases the old check-then-insert raced hold two experiments of one name: the
    constraint must still apply, the oldest keeping the name."""
    executor = MigrationExecutor(connection)
    before = [("tracking", "0001_initial")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    experiments = [
        old.get_model("experiments", "Experiment").objects.create(owner_id=alice.id, name="grpo")
        for _ in range(2)
    ]
    for experiment in experiments:
        old.get_model("tracking", "TrackedExperiment").objects.create(experiment=experiment)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    claims = TrackedExperiment.objects.order_by("experiment_id").values_list("owner", "name")
    assert list(claims) == [(alice.id, "grpo"), (alice.id, None)]


def test_nan_and_infinities_are_gaps_read_back_as_logged_and_the_batch_is_kept(client, alice):
    run = post(client, alice, "runs/create", {"experiment_id": "0"}).json()["run"]
    run_id = run["info"]["run_id"]
    batch = [
        {"key": "loss", "value": 0.5, "timestamp": 1, "step": 0},
        {"key": "loss", "value": "NaN", "timestamp": 1, "step": 1},
        {"key": "loss", "value": "Infinity", "timestamp": 1, "step": 2},
        {"key": "loss", "value": "-Infinity", "timestamp": 1, "step": 3},
        {"key": "reward", "value": 0.25, "timestamp": 1, "step": 3},
    ]
    done = post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": batch})
    assert done.status_code == 200, done.content

    stored = MetricPoint.objects.filter(key="loss").order_by("step").values_list("value", flat=True)
    assert list(stored) == [0.5, None, None, None]
    assert Run.objects.get().step == 3
    history = client.get(
        API + "metrics/get-history", {"run_id": run_id, "metric_key": "loss"}, headers=bearer(alice)
    ).json()["metrics"]
    assert [m["value"] for m in history] == [0.5, "NaN", "Infinity", "-Infinity"]
    got = client.get(API + "runs/get", {"run_id": run_id}, headers=bearer(alice)).json()
    latest = {m["key"]: m["value"] for m in got["run"]["data"]["metrics"]}
    assert latest == {"loss": "-Infinity", "reward": 0.25}

    again = [
        {"key": "loss", "value": "NaN", "timestamp": 1, "step": 2},
        {"key": "loss", "value": "Infinity", "timestamp": 1, "step": 3},
    ]
    done = post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": again})
    assert done.status_code == 200, done.content
    history = client.get(
        API + "metrics/get-history", {"run_id": run_id, "metric_key": "loss"}, headers=bearer(alice)
    ).json()["metrics"]
    # Every point stays; at one time the one logged last stands at its step.
    assert [m["value"] for m in history] == [0.5, "NaN", "Infinity", "NaN", "-Infinity", "Infinity"]
    got = client.get(API + "runs/get", {"run_id": run_id}, headers=bearer(alice)).json()
    assert {m["key"]: m["value"] for m in got["run"]["data"]["metrics"]}["loss"] == "Infinity"
