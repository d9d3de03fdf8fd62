"""Each metric point reads back with the timestamp it was logged with (every key at
a step used to return the newest timestamp of any key at that step), through the history
(whole and paged) and the run's latest metrics, after later batches at the same step, after
a point logged again at another time (kept beside the first), and after an exact repeat
(dropped)."""

import json

import pytest

from tests.people import bearer

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"


def post(client, user, endpoint, body):
    response = client.post(
        API + endpoint, json.dumps(body), content_type="application/json", headers=bearer(user)
    )
    assert response.status_code == 200, response.content
    return response.json()


def point(key, step, timestamp, value=1.0):
    return {"key": key, "value": value, "timestamp": timestamp, "step": step}


def history(client, user, run_id, key, **paging):
    response = client.get(
        API + "metrics/get-history",
        {"run_id": run_id, "metric_key": key, **paging},
        headers=bearer(user),
    )
    assert response.status_code == 200, response.content
    return [(m["step"], m["timestamp"]) for m in response.json()["metrics"]]


def latest(client, user, run_id):
    response = client.get(API + "runs/get", {"run_id": run_id}, headers=bearer(user))
    return {m["key"]: m["timestamp"] for m in response.json()["run"]["data"]["metrics"]}


def test_every_point_reads_back_with_its_own_timestamp(client, alice):
    run_id = post(client, alice, "runs/create", {"experiment_id": "0"})["run"]["info"]["run_id"]

    def log(*points):
        return post(client, alice, "runs/log-batch", {"run_id": run_id, "metrics": list(points)})

    log(point("train/loss", 1, 1000), point("lr", 1, 1001), point("train/loss", 2, 2000))
    log(point("eval/acc", 1, 5000))  # an evaluation at step 1, later

    assert history(client, alice, run_id, "train/loss") == [(1, 1000), (2, 2000)]
    assert history(client, alice, run_id, "lr") == [(1, 1001)]
    assert history(client, alice, run_id, "eval/acc") == [(1, 5000)]
    assert history(client, alice, run_id, "train/loss", max_results=1) == [(1, 1000)]
    assert latest(client, alice, run_id) == {"train/loss": 2000, "lr": 1001, "eval/acc": 5000}

    # Logged again at another time: a point of its own, as MLflow keeps it, and
    # the one that stands at its step (the latest).
    log(point("train/loss", 1, 7000))
    assert history(client, alice, run_id, "train/loss") == [(1, 1000), (1, 7000), (2, 2000)]
    log(point("train/loss", 1, 1000))  # an exact repeat: dropped
    assert history(client, alice, run_id, "train/loss") == [(1, 1000), (1, 7000), (2, 2000)]
    assert history(client, alice, run_id, "eval/acc") == [(1, 5000)]
