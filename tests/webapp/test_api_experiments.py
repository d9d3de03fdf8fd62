"""POST /api/v1/experiments queues a matrix; GET and DELETE /api/v1/experiments/<id>."""

import json

import huggingface_hub
import pytest
import requests
from huggingface_hub.utils import RepositoryNotFoundError

from tests.people import bearer, make_experiment
from webapp.experiments.models import Experiment, Run

pytestmark = pytest.mark.django_db

SPEC = {
    "name": "Voting vs single",
    "preset": "cpu-demo",
    "config": {"steps": 4, "eval_every": 2},
    "matrix": {"workflow": ["single", "voting"], "seed": [0, 1]},
}


def post(client, user, body, **kwargs):
    payload = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(
        "/api/v1/experiments",
        payload,
        content_type="application/json",
        headers=bearer(user),
        **kwargs,
    )


def test_posting_a_spec_stores_the_experiment_and_one_queued_run_per_cell(client, alice):
    response = post(client, alice, SPEC)

    assert response.status_code == 201
    body = response.json()
    experiment = Experiment.objects.get(id=body["id"])
    assert experiment.owner == alice and experiment.preset == "cpu-demo"
    assert experiment.base_config == {"steps": 4, "eval_every": 2}
    runs = list(experiment.runs.order_by("id"))
    assert [r["id"] for r in body["runs"]] == [r.id for r in runs]
    assert [(r.workflow, r.seed) for r in runs] == [
        ("single", 0),
        ("single", 1),
        ("voting", 0),
        ("voting", 1),
    ]
    for run in runs:
        assert run.status == Run.QUEUED and run.queue == "cpu"
        assert run.config["steps"] == 4 and run.config["model"] == "tiny-s"
        assert run.total_steps == 4 and len(run.config_hash) == 16


def test_axes_left_out_take_the_configs_value(client, alice):
    response = post(client, alice, {"name": "one", "config": {"task": "code", "model": "tiny-m"}})

    assert response.status_code == 201
    run = Run.objects.get(experiment_id=response.json()["id"])
    assert (run.workflow, run.task, run.model, run.sharing, run.seed) == (
        "single",
        "code",
        "tiny-m",
        "shared",
        0,
    )


@pytest.mark.parametrize(
    "config, queue",
    [
        ({"model": "Qwen/Qwen3-0.6B"}, "gpu"),  # auto: a real model goes to a GPU
        ({"model": "tiny-l"}, "cpu"),  # auto: a tiny model is made for the CPU
        ({"model": "Qwen/Qwen3-0.6B", "device": "cpu"}, "cpu"),
        ({"model": "tiny-s", "device": "cuda"}, "gpu"),
    ],
)
def test_runs_go_to_the_queue_of_their_device(client, alice, config, queue):
    response = post(client, alice, {"name": "route", "config": config})

    assert response.status_code == 201
    assert response.json()["runs"][0]["queue"] == queue


def test_bad_values_get_400_naming_each_field_and_store_nothing(client, alice):
    body = {**SPEC, "config": {"lr": -1, "loss_agg": "sum", "bogus": 1}}

    response = post(client, alice, body)

    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"config.lr", "config.loss_agg", "config.bogus"}
    assert "greater than 0" in fields["config.lr"]
    assert "seq-mean-token-mean" in fields["config.loss_agg"]
    assert not Experiment.objects.exists()


def test_a_bad_matrix_value_is_named_as_the_matrix_axis(client, alice):
    response = post(client, alice, {"name": "x", "matrix": {"workflow": ["single", "solo"]}})

    assert response.status_code == 400
    assert "matrix.workflow" in response.json()["fields"]
    assert "solo" in response.json()["fields"]["matrix.workflow"]


def test_a_bad_first_matrix_value_is_named_as_the_matrix_axis_too(client, alice):
    response = post(client, alice, {"name": "x", "matrix": {"sharing": ["everyone"]}})

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["matrix.sharing"]


def test_a_matrix_that_is_not_lists_of_values_gets_400(client, alice):
    response = post(client, alice, {"name": "x", "matrix": {"seed": 3, "color": ["red"]}})

    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"matrix.seed", "matrix.color"}


def test_an_unknown_preset_gets_400(client, alice):
    response = post(client, alice, {"name": "x", "preset": "fast"})

    assert response.status_code == 400
    assert "cpu-demo" in response.json()["fields"]["preset"]


def test_a_missing_name_gets_400(client, alice):
    response = post(client, alice, {"config": {}})

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["name"]


def test_config_must_be_an_object(client, alice):
    response = post(client, alice, {"name": "x", "config": ["steps", 4]})

    assert response.status_code == 400
    assert response.json()["fields"] == {"config": "must be a JSON object"}


@pytest.mark.parametrize("body", ["{not json", "[1, 2]", ""])
def test_a_body_that_is_not_a_json_object_gets_400(client, alice, body):
    response = post(client, alice, body)

    assert response.status_code == 400
    assert "JSON" in response.json()["error"]


def test_a_body_over_the_limit_gets_413(client, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = post(client, alice, {**SPEC, "description": "x" * 2000})

    assert response.status_code == 413
    assert "limit" in response.json()["error"]


def test_the_experiments_endpoint_allows_get_and_post_only(client, alice):
    response = client.put("/api/v1/experiments", "{}", headers=bearer(alice))

    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"


def test_the_teammate_reads_an_experiment_with_its_runs(client, alice, bob):
    experiment = make_experiment(alice, runs=2)

    response = client.get(f"/api/v1/experiments/{experiment.id}", headers=bearer(bob))

    assert response.status_code == 200
    assert response.json()["owner"] == "alice"
    assert len(response.json()["runs"]) == 2


def test_the_teammate_may_not_delete_an_experiment(client, experiment, bob):
    response = client.delete(f"/api/v1/experiments/{experiment.id}", headers=bearer(bob))

    assert response.status_code == 403
    assert Experiment.objects.filter(id=experiment.id).exists()


@pytest.mark.parametrize("who", ["alice", "carol"])
def test_the_owner_or_staff_deletes_an_experiment(client, experiment, who, request):
    user = request.getfixturevalue(who)

    response = client.delete(f"/api/v1/experiments/{experiment.id}", headers=bearer(user))

    assert response.status_code == 200
    assert not Experiment.objects.filter(id=experiment.id).exists()


def test_an_experiment_with_a_running_run_is_not_deleted(client, experiment, alice):
    experiment.runs.update(status=Run.RUNNING)

    response = client.delete(f"/api/v1/experiments/{experiment.id}", headers=bearer(alice))

    assert response.status_code == 409


def test_an_unknown_experiment_gets_404(client, alice):
    response = client.get("/api/v1/experiments/999999", headers=bearer(alice))

    assert response.status_code == 404
    assert response.json() == {"error": "There is no experiment 999999."}


def test_get_lists_experiments_newest_first_with_their_run_counts(client, alice, bob):
    older = make_experiment(alice, name="Older", runs=2)
    newer = make_experiment(bob, name="Newer", runs=1)
    Run.objects.filter(id=older.runs.order_by("id").first().id).update(status=Run.SUCCEEDED)

    response = client.get("/api/v1/experiments", headers=bearer(alice))

    assert response.status_code == 200
    body = response.json()
    assert [e["id"] for e in body["experiments"]] == [newer.id, older.id]
    assert body["experiments"][1]["run_counts"] == {"queued": 1, "succeeded": 1}
    assert body["experiments"][0]["owner"] == bob.username and body["total"] == 2
    page = client.get("/api/v1/experiments?limit=1&offset=1", headers=bearer(alice)).json()
    assert [e["name"] for e in page["experiments"]] == ["Older"]
    assert client.get("/api/v1/experiments?limit=0", headers=bearer(alice)).status_code == 400


def _hub_says_no(repo_id, **kwargs):
    # What the Hugging Face Hub answers for an id it does not know (the Hub cannot be reached
    # from the tests: its answer is made here).
    response = requests.Response()
    response.status_code = 404
    raise RepositoryNotFoundError(
        f"404 Client Error: Repository Not Found for {repo_id}", response=response
    )


def test_a_model_id_the_hub_does_not_know_is_refused_at_submit_time(client, alice, monkeypatch):
    # Once a model id that does not exist was queued and failed only on the worker.
    monkeypatch.setenv("TROUPE_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub, "model_info", _hub_says_no)
    body = {"name": "typo", "preset": "cpu-demo", "config": {"model": "Qwen/Qwen3-0.6Bx"}}

    response = client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 400
    assert "no model 'Qwen/Qwen3-0.6Bx' on the Hugging Face Hub" in json.dumps(response.json())
    assert not Run.objects.exists()


def test_a_model_id_that_cannot_be_checked_offline_is_queued_with_a_warning(client, alice):
    body = {"name": "offline", "preset": "cpu-demo", "config": {"model": "Qwen/Qwen3-0.6B"}}

    response = client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 201
    assert any("was not checked" in w for w in response.json()["warnings"])
