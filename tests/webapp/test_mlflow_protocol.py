"""The MLflow endpoints request by request (Django's test client): the Default experiment, who
may write, MLflow's limits and error shapes, idempotent batches, params that never change,
tags that fill the matrix cell, status mapping, search, and paged history. Nothing a refused
request carried is stored."""

import json

import pytest

from tests.people import bearer, make_experiment
from webapp.experiments.models import Alert, Experiment, MetricPoint, Run

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"


def post(client, user, endpoint, body):
    headers = bearer(user) if user else {}
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(API + endpoint, data, content_type="application/json", headers=headers)


def get(client, user, endpoint, **params):
    return client.get(API + endpoint, params, headers=bearer(user) if user else {})


def error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error_code"] == code
    return body["message"]


def new_run(client, user, experiment_id="0", **extra):
    response = post(client, user, "runs/create", {"experiment_id": experiment_id, **extra})
    assert response.status_code == 200, response.content
    return response.json()["run"]


def metrics(n, key="loss", step0=0, value=0.5):
    return [
        {"key": key, "value": value, "timestamp": 1000 + i, "step": step0 + i} for i in range(n)
    ]


def test_every_user_has_experiment_0_named_default(client, alice):
    by_id = get(client, alice, "experiments/get", experiment_id="0").json()["experiment"]
    by_name = get(client, alice, "experiments/get-by-name", experiment_name="Default").json()
    assert by_id["experiment_id"] == by_name["experiment"]["experiment_id"] == "0"
    assert by_id["name"] == "Default"

    run = new_run(client, alice)  # no experiment named: MLflow's default

    assert run["info"]["experiment_id"] == "0"
    assert Experiment.objects.get(owner=alice, name="Default").runs.count() == 1


def test_experiment_names_are_unique_per_owner(client, alice, bob):
    created = post(client, alice, "experiments/create", {"name": "grpo"})
    assert created.status_code == 200
    error(
        post(client, alice, "experiments/create", {"name": "grpo"}), 400, "RESOURCE_ALREADY_EXISTS"
    )
    assert post(client, bob, "experiments/create", {"name": "grpo"}).status_code == 200
    found = get(client, alice, "experiments/get-by-name", experiment_name="grpo").json()
    assert found["experiment"]["experiment_id"] == created.json()["experiment_id"]
    message = error(
        get(client, alice, "experiments/get-by-name", experiment_name="nope"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )
    assert "nope" in message


def test_no_token_is_unauthenticated_and_a_teammate_may_not_write(client, alice, bob):
    run = new_run(client, alice)
    run_id = run["info"]["run_id"]
    assert "MLFLOW_TRACKING_TOKEN" in error(
        get(client, None, "runs/get", run_id=run_id), 401, "UNAUTHENTICATED"
    )
    experiment_id = Experiment.objects.get(owner=alice).id

    error(
        post(client, bob, "runs/log-batch", {"run_id": run_id, "metrics": metrics(3)}),
        403,
        "PERMISSION_DENIED",
    )
    error(
        post(client, bob, "runs/create", {"experiment_id": str(experiment_id)}),
        403,
        "PERMISSION_DENIED",
    )
    error(
        post(client, bob, "runs/update", {"run_id": run_id, "status": "KILLED"}),
        403,
        "PERMISSION_DENIED",
    )

    assert get(client, bob, "runs/get", run_id=run_id).status_code == 200  # reading is open
    assert Run.objects.count() == 1 and not MetricPoint.objects.exists()
    assert Run.objects.get().status == Run.RUNNING


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"metrics": metrics(1001)}, "1001 metrics (at most 1000)"),
        ({"params": [{"key": f"p{i}", "value": "1"} for i in range(101)]}, "101 params"),
        ({"tags": [{"key": f"t{i}", "value": "1"} for i in range(101)]}, "101 tags"),
        ({"metrics": [*metrics(2), {"key": "loss", "value": "high", "step": 5}]}, "not a number"),
        ({"metrics": [*metrics(2), {"key": "loss$", "value": 1, "step": 5}]}, "'loss$'"),
        ({"metrics": [*metrics(2), {"key": "a/../b", "value": 1, "step": 5}]}, "'..'"),
        ({"metrics": [*metrics(2), {"key": "k" * 251, "value": 1, "step": 5}]}, "250 characters"),
        ({"metrics": [*metrics(2), {"key": "loss", "value": 1, "step": -(2**63) - 1}]}, "'step'"),
        ({"metrics": [*metrics(2), {"key": "loss", "value": 1, "step": 2**63}]}, "'step'"),
        ({"metrics": [*metrics(2), {"key": "loss", "step": 5}]}, "missing value"),
        ({"metrics": [*metrics(2), {"key": "loss", "value": 1, "step": 1.5}]}, "'step'"),
        ({"tags": [{"key": "t", "value": "lone \udc80"}]}, "surrogate"),
        ({"metrics": "loss"}, "must be a list"),
    ],
)
def test_bad_batches_are_refused_whole_with_a_message_naming_the_problem(
    client, alice, body, words
):
    run_id = new_run(client, alice)["info"]["run_id"]

    message = error(
        post(client, alice, "runs/log-batch", {"run_id": run_id, **body}),
        400,
        "INVALID_PARAMETER_VALUE",
    )

    assert words in message
    assert not MetricPoint.objects.exists()
    assert get(client, alice, "runs/get", run_id=run_id).json()["run"]["data"]["params"] == []


def test_unknown_runs_endpoints_and_bodies_get_mlflow_errors(client, alice):
    message = error(
        post(client, alice, "runs/log-batch", {"run_id": "f" * 32, "metrics": []}),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )
    assert "f" * 32 in message
    error(
        get(client, alice, "metrics/get-history", run_id="123456", metric_key="x"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )
    error(post(client, alice, "runs/log-batch", "{not json"), 400, "INVALID_PARAMETER_VALUE")
    error(post(client, alice, "runs/log-batch", {"metrics": []}), 400, "INVALID_PARAMETER_VALUE")
    error(post(client, alice, "registered-models/create", {"name": "m"}), 404, "ENDPOINT_NOT_FOUND")
    wrong_method = get(client, alice, "runs/log-batch")
    error(wrong_method, 404, "ENDPOINT_NOT_FOUND")
    assert wrong_method["Allow"] == "POST"
    error(
        get(client, alice, "experiments/get", experiment_id="999"), 404, "RESOURCE_DOES_NOT_EXIST"
    )
    error(
        get(client, alice, "experiments/get", experiment_id="abc"), 400, "INVALID_PARAMETER_VALUE"
    )


def test_a_replayed_batch_overwrites_and_aliases_are_stored_beside_the_original(client, alice):
    run_id = new_run(client, alice)["info"]["run_id"]
    batch = {"run_id": run_id, "metrics": metrics(10, key="actor/generator/grad_norm")}
    for _ in range(3):
        assert post(client, alice, "runs/log-batch", batch).status_code == 200

    keys = MetricPoint.objects.values_list("key", flat=True)
    assert sorted(set(keys)) == ["actor/generator/grad_norm", "role/generator/grad_norm"]
    assert MetricPoint.objects.count() == 20
    got = get(client, alice, "runs/get", run_id=run_id).json()["run"]["data"]["metrics"]
    assert [m["key"] for m in got] == ["actor/generator/grad_norm"]
    assert got[0] == {
        "key": "actor/generator/grad_norm",
        "value": 0.5,
        "timestamp": 1009,
        "step": 9,
    }


def test_params_never_change_and_tags_fill_the_matrix_cell(client, alice):
    run_id = new_run(client, alice, tags=[{"key": "workflow", "value": "voting"}])["info"]["run_id"]
    assert (
        post(
            client, alice, "runs/log-parameter", {"run_id": run_id, "key": "seed", "value": "4"}
        ).status_code
        == 200
    )
    assert (
        post(
            client, alice, "runs/log-parameter", {"run_id": run_id, "key": "seed", "value": "4"}
        ).status_code
        == 200
    )
    message = error(
        post(client, alice, "runs/log-parameter", {"run_id": run_id, "key": "seed", "value": "5"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "seed" in message and "'4'" in message and "'5'" in message
    for key, value in [("sharing", "shared"), ("task", "code"), ("model", "tiny-s")]:
        response = post(
            client, alice, "runs/set-tag", {"run_id": run_id, "key": key, "value": value}
        )
        assert response.status_code == 200

    run = Run.objects.get()
    assert (run.workflow, run.task, run.model, run.sharing, run.seed) == (
        "voting",
        "code",
        "tiny-s",
        "shared",
        4,
    )
    assert run.config == {"seed": "4"}


@pytest.mark.parametrize(
    ("status", "troupe"),
    [("FINISHED", Run.SUCCEEDED), ("FAILED", Run.FAILED), ("KILLED", Run.CANCELLED)],
)
def test_run_status_and_end_time_map_to_troupe(client, alice, status, troupe):
    run_id = new_run(client, alice, start_time=1_700_000_000_000)["info"]["run_id"]

    update = {"run_id": run_id, "status": status, "end_time": 1_700_000_060_000}
    response = post(client, alice, "runs/update", update)

    assert response.json()["run_info"]["status"] == status
    assert response.json()["run_info"]["end_time"] == 1_700_000_060_000
    run = Run.objects.get()
    assert run.status == troupe
    assert (run.finished - run.started).total_seconds() == 60


def test_a_run_ended_by_the_client_gets_the_radars_verdict_at_once(client, alice):
    run_id = new_run(client, alice)["info"]["run_id"]
    # Base 0.2, peak 0.7, then two evaluations under the line 0.45: too few for an alert
    # while the run trains (the last three are not all down) …
    curve = [0.2, 0.4, 0.6, 0.7, 0.7, 0.3, 0.2]
    points = [
        {"key": "eval/accuracy", "value": v, "timestamp": 1000, "step": 10 * i}
        for i, v in enumerate(curve)
    ]
    post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": points})
    assert not Alert.objects.exists()

    post(client, alice, "runs/update", {"run_id": run_id, "status": "FINISHED"})

    # … ended, the mean of the last three (0.4) is under it: a confirmed cliff from step 50.
    alert = Alert.objects.get()
    assert (alert.kind, alert.step, alert.provisional) == ("cliff", 50, False)


def test_a_worker_trained_run_is_readable_by_number_but_not_writable(client, alice):
    run = make_experiment(alice).runs.get()
    got = get(client, alice, "runs/get", run_id=str(run.id)).json()["run"]
    assert got["info"]["run_id"] == str(run.id) and got["info"]["status"] == "SCHEDULED"
    error(
        post(client, alice, "runs/log-batch", {"run_id": str(run.id), "metrics": metrics(1)}),
        400,
        "INVALID_STATE",
    )


def test_a_like_pattern_that_backtracks_answers_at_once(client, alice):
    """A param of 4,000 a's against '%a%a…%b': hours for a regex that backtracks (`%` as
    `.*`), milliseconds for `like_regex`; pytest-timeout fails the test in the first case."""
    experiment_id = post(client, alice, "experiments/create", {"name": "slow"}).json()[
        "experiment_id"
    ]
    run_id = new_run(client, alice, experiment_id)["info"]["run_id"]
    body = {"run_id": run_id, "params": [{"key": "p", "value": "a" * 4000}]}
    assert post(client, alice, "runs/log-batch", body).status_code == 200
    for pattern, hits in (("%a%a%a%a%a%a%a%b", 0), ("%a%a%a%a%a%a_a", 1)):
        body = {"experiment_ids": [experiment_id], "filter": f"params.p LIKE '{pattern}'"}
        response = post(client, alice, "runs/search", body)
        assert response.status_code == 200, response.content
        assert len(response.json().get("runs", [])) == hits


def test_runs_search_filters_orders_and_pages(client, alice):
    experiment_id = post(client, alice, "experiments/create", {"name": "sweep"}).json()[
        "experiment_id"
    ]
    for seed in range(5):
        run_id = new_run(client, alice, experiment_id, run_name=f"s{seed}", start_time=1000 + seed)[
            "info"
        ]["run_id"]
        body = {
            "run_id": run_id,
            "metrics": [{"key": "loss", "value": seed / 10, "timestamp": 1, "step": 0}],
            "params": [{"key": "seed", "value": str(seed)}],
            "tags": [{"key": "sharing", "value": "shared" if seed % 2 else "per_role"}],
        }
        assert post(client, alice, "runs/log-batch", body).status_code == 200

    def names(**body):
        response = post(client, alice, "runs/search", {"experiment_ids": [experiment_id], **body})
        assert response.status_code == 200, response.content
        return [r["info"]["run_name"] for r in response.json()["runs"]], response.json()

    assert names()[0] == ["s4", "s3", "s2", "s1", "s0"]  # newest first
    assert names(filter="tags.sharing = 'shared' AND metrics.loss > 0.2")[0] == ["s3"]
    assert names(filter="params.seed != '0'", order_by=["metrics.loss ASC"])[0] == [
        "s1",
        "s2",
        "s3",
        "s4",
    ]
    assert names(filter="attributes.run_name LIKE 's%' AND start_time >= 1003")[0] == ["s4", "s3"]
    first, body = names(max_results=2, order_by=["run_name"])
    assert first == ["s0", "s1"]
    assert names(max_results=2, order_by=["run_name"], page_token=body["next_page_token"])[0] == [
        "s2",
        "s3",
    ]
    bad = post(
        client,
        alice,
        "runs/search",
        {"experiment_ids": [experiment_id], "filter": "metrics.loss ~ 3"},
    )
    assert "Cannot read the filter" in error(bad, 400, "INVALID_PARAMETER_VALUE")


def test_metric_history_pages_in_step_order(client, alice):
    run_id = new_run(client, alice)["info"]["run_id"]
    post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": metrics(25)})

    pages, token = [], None
    while True:
        params = {"run_id": run_id, "metric_key": "loss", "max_results": 10}
        if token:
            params["page_token"] = token
        body = get(client, alice, "metrics/get-history", **params).json()
        pages.append([m["step"] for m in body["metrics"]])
        token = body.get("next_page_token")
        if not token:
            break

    assert pages == [list(range(10)), list(range(10, 20)), list(range(20, 25))]
    everything = get(client, alice, "metrics/get-history", run_id=run_id, metric_key="loss")
    assert len(everything.json()["metrics"]) == 25 and "next_page_token" not in everything.json()


def test_experiments_search_lists_the_callers_default_and_filters_by_name(client, alice):
    post(client, alice, "experiments/create", {"name": "math-sweep"})
    post(client, alice, "experiments/create", {"name": "code-sweep"})

    body = post(client, alice, "experiments/search", {"filter": "name LIKE '%sweep'"}).json()
    assert sorted(e["name"] for e in body["experiments"]) == ["code-sweep", "math-sweep"]
    every = post(client, alice, "experiments/search", {}).json()["experiments"]
    assert {"0", *(e["experiment_id"] for e in body["experiments"])} == {
        e["experiment_id"] for e in every
    }


def test_verl_params_carry_the_cell_and_a_named_accuracy_key_maps_to_eval_accuracy(client, alice):
    # verl logs its Hydra config as params flattened with "/": `+troupe.workflow=voting`.
    run_id = new_run(client, alice, tags=[{"key": "troupe.accuracy_key", "value": "val/score"}])[
        "info"
    ]["run_id"]
    params = [
        ("troupe/workflow", "eval_opt"),
        ("troupe/seed", "2"),
        ("trainer/total_training_steps", "500"),
    ]
    body = {
        "run_id": run_id,
        "params": [{"key": k, "value": v} for k, v in params],
        "metrics": [
            {"key": "val/score", "value": 0.4, "timestamp": 1, "step": 10},
            {"key": "val/math/pass_at_1", "value": 0.9, "timestamp": 1, "step": 10},
        ],
    }
    assert post(client, alice, "runs/log-batch", body).status_code == 200

    run = Run.objects.get()
    assert (run.workflow, run.seed, run.total_steps) == ("eval_opt", 2, 500)
    assert MetricPoint.objects.get(key="eval/accuracy").value == 0.4


def test_an_mlflow_run_has_a_run_page_and_an_experiment_page(client, alice):
    run_id = new_run(client, alice, run_name="hf tiny")["info"]["run_id"]
    body = {
        "run_id": run_id,
        "params": [{"key": "learning_rate", "value": "0.001"}],
        "metrics": metrics(5, key="loss"),
    }
    assert post(client, alice, "runs/log-batch", body).status_code == 200
    run = Run.objects.get()
    client.force_login(alice)

    page = client.get(f"/runs/{run.id}/")
    assert page.status_code == 200
    assert b"hf tiny" in page.content and b"learning_rate" in page.content
    assert b"train/loss" in page.content  # the alias of HF's `loss`
    assert client.get(f"/experiments/{run.experiment_id}/").status_code == 200
