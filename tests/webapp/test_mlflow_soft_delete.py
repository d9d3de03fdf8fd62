"""MLflow's soft delete through the real client against a live Troupe: a deleted run or
experiment is in the "deleted" stage (`get_run` still answers it), searches leave it out by
default (ViewType.ACTIVE_ONLY) and show it under DELETED_ONLY and ALL, `restore_run` and
`restore_experiment` bring it back with its data, Troupe's lists hide it while its own page
says it is deleted, and `manage.py purge_deleted` removes it for good."""

import os

import mlflow
import pytest
import requests
from django.core.management import call_command
from mlflow import MlflowClient
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Experiment, MetricPoint, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch):
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        try:
            yield base
        finally:
            while mlflow.active_run():
                mlflow.end_run()


def run_ids(client, experiment_id, view) -> set[str]:
    return {r.info.run_id for r in client.search_runs([experiment_id], run_view_type=view)}


def test_a_deleted_run_is_hidden_from_searches_until_restored(troupe, alice, client):
    mlflow_client = MlflowClient()
    experiment_id = mlflow_client.create_experiment("soft delete")
    kept, gone = (mlflow_client.create_run(experiment_id).info.run_id for _ in range(2))
    mlflow_client.log_metric(gone, "loss", 0.5, step=3)

    mlflow_client.delete_run(gone)
    info = mlflow_client.get_run(gone).info
    assert info.lifecycle_stage == "deleted"
    assert run_ids(mlflow_client, experiment_id, ViewType.ACTIVE_ONLY) == {kept}
    assert run_ids(mlflow_client, experiment_id, ViewType.DELETED_ONLY) == {gone}
    assert run_ids(mlflow_client, experiment_id, ViewType.ALL) == {kept, gone}
    assert {r.info.run_id for r in mlflow.search_runs([experiment_id], output_format="list")} == {
        kept
    }
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        mlflow_client.log_metric(gone, "loss", 0.25, step=4)

    # Troupe's pages: gone from the experiment's list, its own page says so.
    number = int(mlflow_client.get_run(gone).data.tags["troupe.run_id"])
    client.force_login(alice)
    listed = client.get(f"/experiments/{experiment_id}/").content.decode()
    assert f"/runs/{number}/" not in listed
    page = client.get(f"/runs/{number}/").content.decode()
    assert 'id="deleted-note"' in page and f"restore_run(&quot;{gone}&quot;)" in page

    mlflow_client.restore_run(gone)
    assert mlflow_client.get_run(gone).info.lifecycle_stage == "active"
    assert run_ids(mlflow_client, experiment_id, ViewType.ACTIVE_ONLY) == {kept, gone}
    assert [(m.step, m.value) for m in mlflow_client.get_metric_history(gone, "loss")] == [(3, 0.5)]
    assert f"/runs/{number}/" in client.get(f"/experiments/{experiment_id}/").content.decode()
    assert 'id="deleted-note"' not in client.get(f"/runs/{number}/").content.decode()


def test_a_deleted_experiment_and_its_runs_come_back_or_are_purged(troupe, alice, client):
    mlflow_client = MlflowClient()
    experiment_id = mlflow_client.create_experiment("trash")
    other_id = mlflow_client.create_experiment("kept")
    run_id = mlflow_client.create_run(experiment_id).info.run_id
    mlflow_client.log_metric(run_id, "loss", 1.0, step=0)

    mlflow_client.delete_experiment(experiment_id)
    assert mlflow_client.get_experiment(experiment_id).lifecycle_stage == "deleted"
    assert mlflow_client.get_experiment_by_name("trash").lifecycle_stage == "deleted"
    assert mlflow_client.get_run(run_id).info.lifecycle_stage == "deleted"
    names = {e.name for e in mlflow_client.search_experiments()}
    assert "trash" not in names and "kept" in names
    deleted = mlflow_client.search_experiments(view_type=ViewType.DELETED_ONLY)
    assert [e.experiment_id for e in deleted] == [experiment_id]
    assert "trash" in {e.name for e in mlflow_client.search_experiments(view_type=ViewType.ALL)}
    with pytest.raises(MlflowException, match="deleted experiment"):
        mlflow.set_experiment("trash")  # the client's own check, from lifecycle_stage
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        mlflow_client.create_run(experiment_id)
    with pytest.raises(MlflowException, match="already exists"):
        mlflow_client.create_experiment("trash")  # a deleted experiment keeps its name

    client.force_login(alice)
    listed = client.get("/experiments/").content.decode()
    assert f"/experiments/{experiment_id}/" not in listed
    assert f"/experiments/{other_id}/" in listed
    assert 'id="deleted-note"' in client.get(f"/experiments/{experiment_id}/").content.decode()

    mlflow_client.restore_experiment(experiment_id)
    assert mlflow_client.get_experiment(experiment_id).lifecycle_stage == "active"
    assert mlflow_client.get_run(run_id).info.lifecycle_stage == "active"
    assert f"/experiments/{experiment_id}/" in client.get("/experiments/").content.decode()

    mlflow_client.delete_experiment(experiment_id)
    call_command("purge_deleted", "--older-than", "1")  # deleted just now: kept
    assert Experiment.objects.filter(id=experiment_id).exists()
    call_command("purge_deleted")
    assert not Experiment.objects.filter(id=experiment_id).exists()
    assert not Run.objects.filter(experiment_id=experiment_id).exists()
    assert not MetricPoint.objects.filter(key="loss").exists()
    assert Experiment.objects.filter(id=other_id).exists()
    with pytest.raises(MlflowException, match="RESOURCE_DOES_NOT_EXIST"):
        mlflow_client.get_run(run_id)


def test_search_refuses_an_unknown_view_type(troupe):
    response = requests.post(
        f"{troupe}/api/2.0/mlflow/runs/search",
        json={"experiment_ids": ["0"], "run_view_type": "SOMETIMES"},
        headers={"Authorization": f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"},
        timeout=30,
    )
    assert (
        response.status_code == 400 and response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    )
