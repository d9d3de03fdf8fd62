"""MLflow endpoints that were missing, request by request: renaming (still unique per
owner), tagging and deleting experiments, deleting runs and tags, the search clauses IN,
NOT IN, IS NULL and IS NOT NULL, and a teammate's experiment found as `<user>/<name>`. Only
the owner or staff changes anything; each refusal is MLflow-shaped."""

import json

import pytest

from tests.people import bearer
from webapp.experiments.models import Experiment, MetricPoint, Run
from webapp.tracking import artifacts, store

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


def post(client, user, endpoint, body):
    return client.post(
        API + endpoint, json.dumps(body), content_type="application/json", headers=bearer(user)
    )


def get(client, user, endpoint, **params):
    return client.get(API + endpoint, params, headers=bearer(user))


def error(response, status, code) -> str:
    assert response.status_code == status, response.content
    assert response.json()["error_code"] == code
    return response.json()["message"]


def create(client, user, name) -> str:
    response = post(client, user, "experiments/create", {"name": name})
    assert response.status_code == 200, response.content
    return response.json()["experiment_id"]


def new_run(client, user, experiment_id, **extra) -> str:
    response = post(client, user, "runs/create", {"experiment_id": experiment_id, **extra})
    assert response.status_code == 200, response.content
    return response.json()["run"]["info"]["run_id"]


def test_an_experiment_is_renamed_and_its_old_name_is_free_again(client, alice, bob):
    first, second = create(client, alice, "draft"), create(client, alice, "other")
    assert (
        post(
            client, alice, "experiments/update", {"experiment_id": first, "new_name": "final"}
        ).status_code
        == 200
    )
    found = get(client, alice, "experiments/get-by-name", experiment_name="final").json()
    assert found["experiment"]["experiment_id"] == first
    assert Experiment.objects.get(id=first).name == "final"
    assert create(client, alice, "draft")  # free again

    taken = post(
        client, alice, "experiments/update", {"experiment_id": second, "new_name": "final"}
    )
    error(taken, 400, "RESOURCE_ALREADY_EXISTS")
    error(
        post(client, bob, "experiments/update", {"experiment_id": first, "new_name": "x"}),
        403,
        "PERMISSION_DENIED",
    )
    error(
        post(client, alice, "experiments/update", {"experiment_id": "0", "new_name": "x"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert Experiment.objects.get(id=second).name == "other"


def test_an_experiment_made_on_troupes_pages_can_be_renamed_and_tagged(client, alice, experiment):
    raw = str(experiment.id)
    tag = {"experiment_id": raw, "key": "team", "value": "rl"}
    assert post(client, alice, "experiments/set-experiment-tag", tag).status_code == 200
    assert (
        post(
            client, alice, "experiments/update", {"experiment_id": raw, "new_name": "renamed"}
        ).status_code
        == 200
    )
    got = get(client, alice, "experiments/get", experiment_id=raw).json()["experiment"]
    assert got["name"] == "renamed"
    assert {"key": "team", "value": "rl"} in got["tags"]
    error(
        post(
            client,
            alice,
            "experiments/set-experiment-tag",
            {"experiment_id": raw, "key": "bad$", "value": "x"},
        ),
        400,
        "INVALID_PARAMETER_VALUE",
    )


def test_a_deleted_experiment_keeps_its_runs_until_purged_with_their_points_and_artifacts(
    client, alice, bob, django_capture_on_commit_callbacks
):
    experiment_id = create(client, alice, "doomed")
    run_id = new_run(client, alice, experiment_id)
    post(client, alice, "runs/log-metric", {"run_id": run_id, "key": "loss", "value": 1, "step": 0})
    troupe = Run.objects.get()
    folder = artifacts.run_folder(troupe.id)
    folder.mkdir(parents=True)
    (folder / "f.txt").write_text("x")

    error(
        post(client, bob, "experiments/delete", {"experiment_id": experiment_id}),
        403,
        "PERMISSION_DENIED",
    )
    error(
        post(client, alice, "experiments/delete", {"experiment_id": "0"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    done = post(client, alice, "experiments/delete", {"experiment_id": experiment_id})
    assert done.status_code == 200
    stage = get(client, alice, "runs/get", run_id=run_id).json()["run"]["info"]["lifecycle_stage"]
    assert stage == "deleted" and MetricPoint.objects.exists() and folder.exists()
    error(
        post(client, alice, "experiments/delete", {"experiment_id": experiment_id}),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert store.purge_deleted() == (1, 1)
    assert not Experiment.objects.filter(id=experiment_id).exists()
    assert not Run.objects.exists() and not MetricPoint.objects.exists()
    assert not folder.exists()
    error(get(client, alice, "runs/get", run_id=run_id), 404, "RESOURCE_DOES_NOT_EXIST")


def test_deleting_a_run_and_a_tag(client, alice, bob, django_capture_on_commit_callbacks):
    run_id = new_run(client, alice, "0", tags=[{"key": "note", "value": "x"}])
    error(
        post(client, bob, "runs/delete-tag", {"run_id": run_id, "key": "note"}),
        403,
        "PERMISSION_DENIED",
    )
    assert (
        post(client, alice, "runs/delete-tag", {"run_id": run_id, "key": "note"}).status_code == 200
    )
    tags = get(client, alice, "runs/get", run_id=run_id).json()["run"]["data"]["tags"]
    assert "note" not in {t["key"] for t in tags}
    error(
        post(client, alice, "runs/delete-tag", {"run_id": run_id, "key": "note"}),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )

    error(post(client, bob, "runs/delete", {"run_id": run_id}), 403, "PERMISSION_DENIED")
    assert post(client, alice, "runs/delete", {"run_id": run_id}).status_code == 200
    assert post(client, alice, "runs/delete", {"run_id": run_id}).status_code == 200  # as MLflow
    error(
        post(client, alice, "runs/log-metric", {"run_id": run_id, "key": "a", "value": 1}),
        400,
        "INVALID_PARAMETER_VALUE",
    )  # MLflow: a deleted run takes no data
    error(post(client, bob, "runs/restore", {"run_id": run_id}), 403, "PERMISSION_DENIED")
    with django_capture_on_commit_callbacks(execute=True):
        assert store.purge_deleted() == (0, 1)
    assert not Run.objects.exists()
    error(post(client, alice, "runs/delete", {"run_id": run_id}), 404, "RESOURCE_DOES_NOT_EXIST")


def test_search_takes_in_not_in_and_is_null(client, alice):
    ids = [new_run(client, alice, "0") for _ in range(3)]
    post(client, alice, "runs/set-tag", {"run_id": ids[0], "key": "note", "value": "x"})

    def found(filter_string):
        response = post(
            client, alice, "runs/search", {"experiment_ids": ["0"], "filter": filter_string}
        )
        assert response.status_code == 200, response.content
        return {r["info"]["run_id"] for r in response.json()["runs"]}

    assert found(f"attributes.run_id IN ('{ids[0]}', '{ids[2]}')") == {ids[0], ids[2]}
    assert found(f"run_id NOT IN ('{ids[0]}')") == {ids[1], ids[2]}
    assert found("tags.note IS NULL") == {ids[1], ids[2]}
    assert found("tags.note IS NOT NULL AND tags.note = 'x'") == {ids[0]}
    message = error(
        post(client, alice, "runs/search", {"experiment_ids": ["0"], "filter": "run_id IN (1, 2)"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "run_id IN" in message


def test_a_teammates_experiment_is_found_by_owner_and_name(client, alice, bob):
    bobs = create(client, bob, "grpo-math")
    error(
        get(client, alice, "experiments/get-by-name", experiment_name="grpo-math"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )  # a bare name is always the caller's own
    got = get(client, alice, "experiments/get-by-name", experiment_name="bob/grpo-math").json()
    assert got["experiment"]["experiment_id"] == bobs
    mine = create(client, alice, "bob/grpo-math")  # the caller's own comes first
    got = get(client, alice, "experiments/get-by-name", experiment_name="bob/grpo-math").json()
    assert got["experiment"]["experiment_id"] == mine


def test_log_inputs_keeps_each_dataset_once_and_refuses_bad_ones_whole(client, alice):
    run_id = new_run(client, alice, "0")
    dataset = {"name": "gsm8k", "digest": "abc", "source_type": "hf", "source": "{}"}
    entry = {"tags": [{"key": "mlflow.data.context", "value": "train"}], "dataset": dataset}
    for _ in range(2):
        done = post(client, alice, "runs/log-inputs", {"run_id": run_id, "datasets": [entry]})
        assert done.status_code == 200, done.content
    bad = {"dataset": {**dataset, "name": "other", "digest": "d" * 37}}
    message = error(
        post(client, alice, "runs/log-inputs", {"run_id": run_id, "datasets": [bad]}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "digest" in message
    got = get(client, alice, "runs/get", run_id=run_id).json()["run"]["inputs"]
    assert got == {"dataset_inputs": [entry]}


def test_search_filters_and_sorts_on_metrics_and_returns_every_metric(client, alice):
    ids = [new_run(client, alice, "0") for _ in range(3)]
    for i, run_id in enumerate(ids):
        for key, value in (("acc", 0.1 * i), ("loss", 3.0 - i), ("lr", 1e-3)):
            post(client, alice, "runs/log-metric", {"run_id": run_id, "key": key, "value": value})
    response = post(
        client,
        alice,
        "runs/search",
        {"experiment_ids": ["0"], "filter": "metrics.acc > 0.05", "order_by": ["metrics.loss"]},
    )
    assert response.status_code == 200, response.content
    runs = response.json()["runs"]
    assert [r["info"]["run_id"] for r in runs] == [ids[2], ids[1]]  # loss 1.0, then 2.0
    for run in runs:  # the page has every key, not only those the search named
        assert {m["key"] for m in run["data"]["metrics"]} == {"acc", "loss", "lr"}
    plain = post(client, alice, "runs/search", {"experiment_ids": ["0"]}).json()["runs"]
    assert all({m["key"] for m in r["data"]["metrics"]} == {"acc", "loss", "lr"} for r in plain)
