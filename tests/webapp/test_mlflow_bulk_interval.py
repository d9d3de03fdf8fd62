"""`metrics/get-history-bulk-interval` as the MLflow UI calls it (GET, `run_ids` repeated in the
query string, also under `/ajax-api/`), compared point for point with what MLflow's own SQL
store's query returns for the same logged points: its sampling (NTILE buckets, first and last point
kept), the step window, every point of a step logged several times. Then its refusals, and
the `sqlstate` and `error_class` MLflow 3.17's server puts in every error."""

import json

import pytest
from django.db import connection
from mlflow.entities import Metric

from tests.people import bearer

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"


def log(client, headers, run_id, metrics):
    body = {"run_id": run_id, "metrics": [m.to_dictionary() for m in metrics]}
    response = client.post(
        API + "runs/log-batch", json.dumps(body), content_type="application/json", headers=headers
    )
    assert response.status_code == 200, response.content


def troupe_run(client, headers) -> str:
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=headers,
    )
    return response.json()["run"]["info"]["run_id"]


def series(seed: int) -> list[Metric]:
    """A run's points: 0..(39 + seed) one a step, and step 7 logged three times."""
    points = [Metric("loss", 1.0 / (s + 1 + seed), 1_000 + s, s) for s in range(40 + seed)]
    points += [Metric("loss", 5.0 + i, 900 + i, 7) for i in range(2)]
    return points


def mlflow_sample(points: list[Metric], max_results: int, start, end) -> list[tuple]:
    """MLflow's SQL store's sampling (`SqlAlchemyStore._sample_rows_with_window_functions`),
    run as its SQL in this test's database: NTILE buckets over (step, timestamp, value), the
    first row of each, then the last row added (or put in place of the last sample)."""
    rows = [(m.step, m.timestamp, m.value) for m in points]
    if start is not None:
        rows = [r for r in rows if start <= r[0] <= end]
    if not rows:
        return []
    values = ", ".join("(%s, %s, %s)" for _ in rows)
    sql = f"""
        WITH pts(step, ts, value) AS (VALUES {values}),
        bucketed AS (SELECT step, ts, value,
                     NTILE(%s) OVER (ORDER BY step, ts, value) AS bucket FROM pts),
        ranked AS (SELECT step, ts, value, ROW_NUMBER() OVER (
                   PARTITION BY bucket ORDER BY step, ts, value) AS rn FROM bucketed)
        SELECT step, ts, value FROM ranked WHERE rn = 1 ORDER BY step, ts, value
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [x for r in rows for x in r] + [max_results])
        sample = [(step, ts, float(value)) for step, ts, value in cursor.fetchall()]
    last = max(rows)
    if sample[-1] != last:
        if len(sample) >= max_results:
            sample[-1] = last
        else:
            sample.append(last)
    return sample


def as_tuples(metrics: list[dict], names: dict[str, int]) -> list[tuple]:
    return [(names[m["run_id"]], m["step"], m["timestamp"], m["value"]) for m in metrics]


@pytest.mark.parametrize(
    "window",
    [
        {},
        {"max_results": 1},
        {"max_results": 7},
        {"max_results": 41},
        {"start_step": 5, "end_step": 20, "max_results": 4},
        {"start_step": 50, "end_step": 60},
    ],
)
@pytest.mark.parametrize("prefix", ["/api/2.0/mlflow/", "/ajax-api/2.0/mlflow/"])
def test_bulk_interval_samples_as_mlflows_store_does(client, alice, window, prefix):
    headers = bearer(alice)
    ours = [troupe_run(client, headers) for _ in range(2)]
    for seed, run_id in enumerate(ours):
        log(client, headers, run_id, series(seed))

    response = client.get(
        prefix + "metrics/get-history-bulk-interval",
        {"run_ids": ours, "metric_key": "loss", **window},
        headers=headers,
    )
    assert response.status_code == 200, response.content
    got = as_tuples(response.json().get("metrics", []), {r: i for i, r in enumerate(ours)})

    limit, start, end = (window.get(k) for k in ("max_results", "start_step", "end_step"))
    expected = [
        (seed, *point)
        for seed in range(2)
        for point in mlflow_sample(series(seed), limit or 2500, start, end)
    ]
    assert got == expected
    assert all(m["key"] == "loss" for m in response.json().get("metrics", []))


def test_bulk_interval_refuses_what_mlflow_refuses(client, alice):
    headers = bearer(alice)
    run_id = troupe_run(client, headers)

    def refused(status, code, **params):
        response = client.get(API + "metrics/get-history-bulk-interval", params, headers=headers)
        assert response.status_code == status, response.content
        assert response.json()["error_code"] == code
        return response.json()

    refused(400, "INVALID_PARAMETER_VALUE", metric_key="loss")  # no run_ids
    refused(400, "INVALID_PARAMETER_VALUE", run_ids=[run_id])  # no metric_key
    refused(400, "INVALID_PARAMETER_VALUE", run_ids=[run_id], metric_key="loss", start_step=3)
    refused(
        400,
        "INVALID_PARAMETER_VALUE",
        run_ids=[run_id],
        metric_key="loss",
        start_step=5,
        end_step=3,
    )
    refused(400, "INVALID_PARAMETER_VALUE", run_ids=[run_id], metric_key="loss", max_results=0)
    refused(400, "INVALID_PARAMETER_VALUE", run_ids=[run_id], metric_key="loss", max_results=2501)
    refused(400, "INVALID_PARAMETER_VALUE", run_ids=[run_id] * 101, metric_key="loss")
    missing = refused(404, "RESOURCE_DOES_NOT_EXIST", run_ids=["f" * 32], metric_key="loss")
    assert missing["error_class"] == "RESOURCE_NOT_FOUND" and missing["sqlstate"] == "KAM00"
    response = client.get(
        API + "metrics/get-history-bulk-interval",
        {"run_ids": run_id, "metric_key": "loss"},
        headers=headers,
    )
    assert response.status_code == 200 and response.json() == {}  # MLflow: no points, no list


@pytest.mark.parametrize(
    ("request_", "status", "code", "error_class", "sqlstate"),
    [
        (
            ("get", "runs/get", {"run_id": "f" * 32}),
            404,
            "RESOURCE_DOES_NOT_EXIST",
            "RESOURCE_NOT_FOUND",
            "KAM00",
        ),
        (
            ("post", "experiments/create", {"name": ""}),
            400,
            "INVALID_PARAMETER_VALUE",
            "INVALID_PARAMETER_VALUE",
            "KAM00",
        ),
        (("get", "no/such/endpoint", {}), 404, "ENDPOINT_NOT_FOUND", "RESOURCE_NOT_FOUND", "KAM00"),
    ],
)
def test_errors_carry_mlflows_error_class_and_sqlstate(
    client, alice, request_, status, code, error_class, sqlstate
):
    """What mlflow 3.17.2's `MlflowException.serialize_as_json` sends for each code: these
    values are its `ErrorClass.from_client_error_code` and `SqlState` of the code."""
    method, endpoint, params = request_
    if method == "get":
        response = client.get(API + endpoint, params, headers=bearer(alice))
    else:
        response = client.post(
            API + endpoint,
            json.dumps(params),
            content_type="application/json",
            headers=bearer(alice),
        )
    assert response.status_code == status, response.content
    body = response.json()
    assert list(body) == ["error_code", "message", "sqlstate", "error_class"]
    assert (body["error_code"], body["error_class"], body["sqlstate"]) == (
        code,
        error_class,
        sqlstate,
    )


def test_an_unauthenticated_error_has_no_class_as_in_mlflow(client):
    body = client.get(API + "runs/get", {"run_id": "1"}).json()
    assert list(body) == ["error_code", "message"] and body["error_code"] == "UNAUTHENTICATED"


def test_every_code_troupe_answers_has_mlflows_class():
    from mlflow.exceptions import MlflowException
    from mlflow.protos import databricks_pb2

    from webapp.tracking.protocol import CLASSES, STATUS

    for code in STATUS:
        expected = json.loads(
            MlflowException("m", error_code=getattr(databricks_pb2, code)).serialize_as_json()
        )
        assert CLASSES.get(code) == (
            (expected["error_class"], expected["sqlstate"]) if "error_class" in expected else None
        ), code
