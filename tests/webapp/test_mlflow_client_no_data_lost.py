"""The real MLflow client against a live Troupe, for the data it once found lost: every point
a client logs reads back (ten values without a step are ten points, a retried batch adds
none), while Troupe's own reads take a step's last value; steps and keys as wide as MLflow
takes them, synchronously and through async logging; a key and its Troupe alias never
overwrite each other; a logged model keeps its metrics and its run's link to it; a NUL
byte in a GET parameter or path is a 400, not a 500; experiments/search answers GET too,
artifacts/list lists a run's folder, and MLflow paths Troupe does not serve answer MLflow's
JSON 404."""

import mlflow
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, MetricPoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch):
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        mlflow.set_experiment("no data lost")  # not the id an earlier test left in the client
        try:
            yield base, token
        finally:
            while mlflow.active_run():
                mlflow.end_run()


def troupe_series(base: str, token: str, run_id: str, key: str) -> dict:
    """One series as Troupe's own API serves it (one value a step)."""
    number = MlflowClient().get_run(run_id).data.tags["troupe.run_id"]
    response = requests.get(
        f"{base}/api/v1/runs/{number}/metrics",
        params={"keys": key},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()["series"].get(key, {"steps": [], "values": []})


def history(run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in MlflowClient().get_metric_history(run_id, key)]


def test_values_logged_without_a_step_are_all_kept_and_a_retry_adds_none(troupe):
    base, token = troupe
    client = MlflowClient()
    with mlflow.start_run() as run:
        for i in range(10):
            mlflow.log_metric("loss", float(i))  # no step: all at step 0
        for i in range(10):
            mlflow.log_metric("async_loss", float(i), synchronous=False)
        mlflow.flush_async_logging()
        # One step logged twice at known times: the later stands for Troupe's pages.
        batch = [Metric("reward", 0.25, 1_000, 5), Metric("reward", 0.75, 2_000, 5)]
        client.log_batch(run.info.run_id, metrics=batch)
        client.log_batch(run.info.run_id, metrics=batch)  # a retry: exact repeats
        client.log_batch(run.info.run_id, metrics=[Metric("reward", 0.5, 1_500, 5)])
    run_id = run.info.run_id

    assert sorted(v for _, v in history(run_id, "loss")) == [float(i) for i in range(10)]
    assert sorted(v for _, v in history(run_id, "async_loss")) == [float(i) for i in range(10)]
    assert [(m.timestamp, m.value) for m in client.get_metric_history(run_id, "reward")] == [
        (1_000, 0.25),
        (1_500, 0.5),
        (2_000, 0.75),
    ]
    paged = client.get_metric_history(run_id, "loss")  # MLflow pages 25,000 at a time
    assert len(paged) == 10
    page = client._tracking_client.store.get_metric_history(run_id, "reward", max_results=2)
    assert [m.value for m in page] == [0.25, 0.5] and page.token
    rest = client._tracking_client.store.get_metric_history(
        run_id, "reward", max_results=2, page_token=page.token
    )
    assert [m.value for m in rest] == [0.75] and not rest.token

    # Troupe's pages and verdicts read one value a step: the one logged last.
    assert troupe_series(base, token, run_id, "reward") == {"steps": [5], "values": [0.75]}
    assert client.get_run(run_id).data.metrics["reward"] == 0.75
    assert MetricPoint.objects.filter(key="loss").count() == 1


@pytest.mark.parametrize("synchronous", [True, False])
def test_steps_and_keys_as_wide_as_mlflows_are_stored(troupe, synchronous):
    long_key = "k" * 250
    points = {-5: 1.0, 2**31: 2.0, 2**63 - 1: 3.0, -(2**63): 4.0}
    with mlflow.start_run() as run:
        for step, value in points.items():
            mlflow.log_metric("wide", value, step=step, synchronous=synchronous)
        mlflow.log_metric(long_key, 0.5, step=1, synchronous=synchronous)
        if not synchronous:
            mlflow.flush_async_logging()
    run_id = run.info.run_id
    assert sorted(history(run_id, "wide")) == sorted(points.items())
    assert history(run_id, long_key) == [(1, 0.5)]
    metrics = MlflowClient().get_run(run_id).data.metrics
    assert metrics["wide"] == 3.0 and metrics[long_key] == 0.5  # the highest step's


@pytest.mark.parametrize("alias_first", [True, False])
def test_a_key_and_its_troupe_alias_never_overwrite_each_other(troupe, alias_first, client, alice):
    base, token = troupe
    with mlflow.start_run() as run:
        if alias_first:  # the alias is filled first, then the client logs the name itself
            mlflow.log_metrics({"loss": 2.0, "val/math/pass_at_1": 0.1}, step=1)
            mlflow.log_metrics({"train/loss": 8.0, "eval/accuracy": 0.9}, step=1)
        else:
            mlflow.log_metrics({"train/loss": 8.0, "eval/accuracy": 0.9}, step=1)
            mlflow.log_metrics({"loss": 2.0, "val/math/pass_at_1": 0.1}, step=1)
        mlflow.log_metrics({"loss": 3.0, "val/math/pass_at_1": 0.2}, step=2)
        mlflow.log_metrics({"reward": 0.5, "train/reward": 0.6}, step=3)  # one batch
    run_id = run.info.run_id

    logged = {
        "loss": 3.0,
        "val/math/pass_at_1": 0.2,
        "train/loss": 8.0,
        "eval/accuracy": 0.9,
        "reward": 0.5,
        "train/reward": 0.6,
    }
    assert MlflowClient().get_run(run_id).data.metrics == logged
    assert history(run_id, "train/loss") == [(1, 8.0)]
    assert history(run_id, "eval/accuracy") == [(1, 0.9)]
    assert troupe_series(base, token, run_id, "train/loss") == {"steps": [1], "values": [8.0]}
    assert troupe_series(base, token, run_id, "train/reward") == {"steps": [3], "values": [0.6]}

    # The run page says where each Troupe name came from.
    client.force_login(alice)
    number = MlflowClient().get_run(run_id).data.tags["troupe.run_id"]
    page = client.get(f"/runs/{number}/").content.decode()
    assert "<code>train/loss</code> is the run's own; <code>loss</code> maps here" in page
    assert "<code>train/reward</code> is the run's own" in page


class Echo(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input: list[str]) -> list[str]:
        return model_input


def test_a_logged_model_keeps_its_metrics_and_the_runs_link_to_it(troupe):
    with mlflow.start_run() as run:
        info = mlflow.pyfunc.log_model(
            name="policy", python_model=Echo(), pip_requirements=["mlflow"]
        )
        mlflow.log_metric("acc", 0.4, step=1, model_id=info.model_id)
        mlflow.log_metric("acc", 0.9, step=2, model_id=info.model_id)
        mlflow.log_metrics({"f1": 0.7}, step=2, model_id=info.model_id, synchronous=False)
        mlflow.flush_async_logging()
    client = MlflowClient()
    outputs = client.get_run(run.info.run_id).outputs.model_outputs
    assert [o.model_id for o in outputs] == [info.model_id]
    assert history(run.info.run_id, "acc") == [(1, 0.4), (2, 0.9)]  # the run's metrics too

    model = client.get_logged_model(info.model_id)
    assert sorted((m.key, m.step, m.value) for m in model.metrics) == [
        ("acc", 1, 0.4),
        ("acc", 2, 0.9),
        ("f1", 2, 0.7),
    ]
    found = mlflow.search_logged_models(filter_string="metrics.acc > 0.5", output_format="list")
    assert [m.model_id for m in found] == [info.model_id]  # the latest value, 0.9
    assert (
        mlflow.search_logged_models(filter_string="metrics.acc < 0.5", output_format="list") == []
    )


def test_a_nul_byte_in_a_get_parameter_or_path_is_a_400(troupe):
    base, token = troupe
    headers = {"Authorization": f"Bearer {token}"}
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 1.0, step=1)
    api = f"{base}/api/2.0/mlflow/"
    requests_ = [
        ("runs/get", {"run_id": "ab\x00cd"}),
        ("experiments/get-by-name", {"experiment_name": "x\x00y"}),
        ("metrics/get-history", {"run_id": run.info.run_id, "metric_key": "lo\x00ss"}),
        ("logged-models/m-\x00", {}),
    ]
    for endpoint, params in requests_:
        answer = requests.get(api + endpoint, params=params, headers=headers, timeout=30)
        assert answer.status_code == 400, (endpoint, answer.text)
        assert answer.json()["error_code"] == "INVALID_PARAMETER_VALUE", endpoint


def test_search_and_listing_answer_get_and_other_mlflow_paths_a_json_404(troupe):
    base, token = troupe
    headers = {"Authorization": f"Bearer {token}"}
    mlflow.set_experiment("searched")
    found = requests.get(
        f"{base}/api/2.0/mlflow/experiments/search",
        headers=headers,
        params={"max_results": "10", "order_by": "name"},
        timeout=30,
    )
    assert found.status_code == 200, found.text
    assert "searched" in [e["name"] for e in found.json()["experiments"]]
    with mlflow.start_run() as run:
        mlflow.log_text("hello", "notes/a.txt")
    asked = {"run_id": run.info.run_id, "path": "notes"}
    listed = requests.get(
        f"{base}/api/2.0/mlflow/artifacts/list", params=asked, headers=headers, timeout=30
    )
    assert listed.status_code == 200, listed.text
    file = {"path": "notes/a.txt", "is_dir": False, "file_size": 5}
    assert listed.json() == {"root_uri": run.info.artifact_uri, "files": [file]}
    for path in (
        "/api/3.0/mlflow/server-info",
        "/api/2.0/preview/mlflow/runs/get",
        "/ajax-api/2.0/mlflow/runs/get",
    ):
        answer = requests.get(base + path, headers=headers, timeout=30)
        assert answer.status_code == 404, path
        assert answer.json()["error_code"] == "ENDPOINT_NOT_FOUND", path
