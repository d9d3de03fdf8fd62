"""The real MLflow client against a live Troupe, where it once differed from MLflow's server:
a param over 6,000 characters or a tag over 8,000 (a run's description too) is cut at that
limit and the rest of its batch stored, async logging included, and the cut is said on the
run page and in the server's log; a timestamp of 0 is kept; the history endpoints answer
only for keys the run logged, not for Troupe's alias copies; a filter treats NaN and ±inf
as MLflow's SQL store does; and answers take MLflow's shapes (`{}` for nothing found, an
experiment's `workspace`)."""

import math

import mlflow
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
API = "/api/2.0/mlflow/"


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch):
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        mlflow.set_experiment("takes what mlflow takes")
        try:
            yield base, token, tmp_path / "gunicorn.log"
        finally:
            mlflow.config.enable_async_logging(False)
            while mlflow.active_run():
                mlflow.end_run()


def raw(base: str, token: str, method: str, endpoint: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return requests.request(method, base + API + endpoint, headers=headers, timeout=30, **kwargs)


def troupe_number(run_id: str) -> str:
    return MlflowClient().get_run(run_id).data.tags["troupe.run_id"]


def test_long_values_are_cut_at_mlflows_limits_and_the_rest_is_stored(troupe, client, alice):
    base, token, server_log = troupe
    short = {f"p{i}": str(i) for i in range(49)}
    mlflow.config.enable_async_logging(True)
    with mlflow.start_run(description="d" * 10_000) as run:
        mlflow.log_params({**short, "long": "z" * 7_000})  # async: an error would be silent
        mlflow.flush_async_logging()
        mlflow.config.enable_async_logging(False)
        mlflow.log_param("huge", "y" * 100_000)  # 100 KB
        mlflow.set_tag("notes", "n" * 9_000)
        mlflow.set_tag("short", "kept")
    run_id = run.info.run_id

    data = MlflowClient().get_run(run_id).data
    assert len(data.params) == 51
    assert {k: data.params[k] for k in short} == short
    assert data.params["long"] == "z" * 6_000
    assert data.params["huge"] == "y" * 6_000
    assert data.tags["mlflow.note.content"] == "d" * 8_000
    assert data.tags["notes"] == "n" * 8_000 and data.tags["short"] == "kept"

    # Better than MLflow, which says nothing: the run page marks the cut value, the run's
    # log and the server's log name each one.
    client.force_login(alice)
    page = client.get(f"/runs/{troupe_number(run_id)}/").content.decode()
    assert "cut: the first 6000 of 7000 characters sent" in page
    assert "cut: the first 6000 of 100000 characters sent" in page
    assert "Param &#x27;long&#x27; was cut to its first 6,000 of 7,000 characters" in page
    assert "Tag &#x27;mlflow.note.content&#x27; was cut to its first 8,000 of 10,000" in page
    logged = server_log.read_text()
    assert f"MLflow run {run_id}: Param 'huge' was cut" in logged
    assert f"MLflow run {run_id}: Tag 'notes' was cut" in logged


def test_a_timestamp_of_zero_is_kept_as_sent(troupe):
    base, token, _ = troupe
    client = MlflowClient()
    with mlflow.start_run() as run:
        run_id = run.info.run_id
        client.log_metric(run_id, "single", 1.0, timestamp=0, step=1)
        client.log_batch(run_id, metrics=[Metric("batched", 2.0, 0, 1)])
        sent = raw(
            base,
            token,
            "POST",
            "runs/log-metric",
            json={"run_id": run_id, "key": "json", "value": 3.0, "timestamp": 0, "step": 1},
        )
        assert sent.status_code == 200, sent.text
    for key in ("single", "batched", "json"):
        assert [(m.timestamp, m.step) for m in client.get_metric_history(run_id, key)] == [(0, 1)]
    latest = {m.key: m.timestamp for m in client.get_run(run_id).data._metric_objs}
    assert latest == {"single": 0, "batched": 0, "json": 0}


def test_the_history_answers_only_for_keys_the_run_logged(troupe):
    base, token, _ = troupe
    client = MlflowClient()
    with mlflow.start_run() as run:
        for step in (1, 2):
            mlflow.log_metrics(
                {
                    "loss": 1.0 / step,  # TRL's: copied to train/loss
                    "actor/pg_loss": 5.0 * step,  # verl's: maps there too
                    "val/math/pass_at_1": 0.1 * step,  # copied to eval/accuracy
                    "actor/generator/grad_norm": 2.0,  # copied to role/generator/grad_norm
                },
                step=step,
            )
    run_id = run.info.run_id
    copies = ("train/loss", "eval/accuracy", "role/generator/grad_norm")
    for key in copies:
        assert client.get_metric_history(run_id, key) == []
        answer = raw(
            base, token, "GET", "metrics/get-history", params={"run_id": run_id, "metric_key": key}
        )
        assert answer.status_code == 200 and answer.json() == {}
        bulk = raw(
            base,
            token,
            "GET",
            "metrics/get-history-bulk-interval",
            params={"run_ids": [run_id], "metric_key": key},
        )
        assert bulk.status_code == 200 and bulk.json() == {}
    assert [m.value for m in client.get_metric_history(run_id, "actor/pg_loss")] == [5.0, 10.0]
    assert set(client.get_run(run_id).data.metrics).isdisjoint(copies)

    # Troupe's own pages keep reading the copies by their names.
    series = requests.get(
        f"{base}/api/v1/runs/{troupe_number(run_id)}/metrics",
        params={"keys": ",".join(copies)},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()["series"]
    assert set(series) == set(copies)


def test_filters_and_orderings_treat_nan_and_infinities_as_mlflow_does(troupe):
    values = {"nan": math.nan, "inf": math.inf, "minus_inf": -math.inf, "one": 1.0, "two": 2.0}
    experiment = mlflow.get_experiment_by_name("takes what mlflow takes").experiment_id
    for name, value in values.items():
        with mlflow.start_run(run_name=name):
            mlflow.log_metric("x", value)
    with mlflow.start_run(run_name="without"):
        mlflow.log_metric("y", 1.0)

    def found(where: str, order: list[str] | None = None) -> list[str]:
        runs = MlflowClient().search_runs([experiment], where, order_by=order)
        names = [r.info.run_name for r in runs]
        return names if order else sorted(names)

    # IEEE 754, as MLflow's SQL store applies it: NaN only satisfies "!=".
    assert found("metrics.x != 1") == ["inf", "minus_inf", "nan", "two"]
    assert found("metrics.x = 1") == ["one"]
    assert found("metrics.x > 1") == ["inf", "two"]
    assert found("metrics.x >= 1") == ["inf", "one", "two"]
    assert found("metrics.x < 2") == ["minus_inf", "one"]
    assert found("metrics.x <= 2") == ["minus_inf", "one", "two"]
    assert found("metrics.x > 1e308") == ["inf"]
    assert found("metrics.x < -1e308") == ["minus_inf"]
    assert found("metrics.x IS NOT NULL") == ["inf", "minus_inf", "nan", "one", "two"]
    assert found("metrics.x IS NULL") == ["without"]
    # Ordered: the numbers, then NaN, then the runs without the metric, either direction.
    ascending = found("", ["metrics.x ASC"])
    assert ascending == ["minus_inf", "one", "two", "inf", "nan", "without"]
    assert found("", ["metrics.x DESC"]) == ["inf", "two", "one", "minus_inf", "nan", "without"]


def test_answers_take_mlflows_shapes(troupe):
    base, token, _ = troupe
    experiment = mlflow.get_experiment_by_name("takes what mlflow takes")
    assert experiment.workspace == "default"
    answer = raw(
        base, token, "GET", "experiments/get", params={"experiment_id": experiment.experiment_id}
    )
    assert answer.json()["experiment"]["workspace"] == "default"
    nothing = raw(
        base,
        token,
        "POST",
        "runs/search",
        json={"experiment_ids": [experiment.experiment_id], "filter": "metrics.x > 1"},
    )
    assert nothing.status_code == 200 and nothing.json() == {}
    with mlflow.start_run() as run:
        pass
    history = raw(
        base,
        token,
        "GET",
        "metrics/get-history",
        params={"run_id": run.info.run_id, "metric_key": "never"},
    )
    assert history.status_code == 200 and history.json() == {}
    none_found = raw(
        base, token, "POST", "experiments/search", json={"filter": "name = 'no such experiment'"}
    )
    assert none_found.status_code == 200 and none_found.json() == {}
