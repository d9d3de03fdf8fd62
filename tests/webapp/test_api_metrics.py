"""POST and GET /api/v1/runs/<id>/metrics: batched, idempotent writes, validated points, and
server-side downsampling; GET /api/v1/metrics?runs=…: the same read for many runs at once."""

import json

import pytest

from tests.people import bearer, make_experiment
from webapp.experiments.models import MetricPoint

pytestmark = pytest.mark.django_db


def send(client, user, run, points, **extra):
    body = points if isinstance(points, str) else json.dumps({"points": points, **extra})
    return client.post(
        f"/api/v1/runs/{run.id}/metrics",
        body,
        content_type="application/json",
        headers=bearer(user),
    )


def stored(run):
    return sorted(MetricPoint.objects.filter(run=run).values_list("key", "step", "value"))


BATCH = [
    {"key": "train/reward", "step": 1, "value": 0.25},
    {"key": "train/reward", "step": 2, "value": 0.5},
    {"key": "eval/accuracy", "step": 0, "value": 0.1},
]


def test_the_owner_writes_a_batch_of_points(client, run, alice):
    response = send(client, alice, run, BATCH)

    assert response.status_code == 200
    assert response.json() == {"accepted": 3}
    assert stored(run) == [
        ("eval/accuracy", 0, 0.1),
        ("train/reward", 1, 0.25),
        ("train/reward", 2, 0.5),
    ]


def test_a_replayed_batch_stores_nothing_twice(client, run, alice):
    send(client, alice, run, BATCH)
    send(client, alice, run, BATCH)

    assert MetricPoint.objects.filter(run=run).count() == 3


def test_a_point_written_again_keeps_its_newest_value(client, run, alice):
    send(client, alice, run, BATCH)
    send(client, alice, run, [{"key": "train/reward", "step": 2, "value": 0.75}])

    assert MetricPoint.objects.get(run=run, key="train/reward", step=2).value == 0.75
    assert MetricPoint.objects.filter(run=run).count() == 3


def test_a_pair_repeated_within_a_batch_keeps_the_last_value(client, run, alice):
    points = [{"key": "k", "step": 1, "value": 1.0}, {"key": "k", "step": 1, "value": 2.0}]

    assert send(client, alice, run, points).json() == {"accepted": 2}
    assert stored(run) == [("k", 1, 2.0)]


def test_null_and_non_finite_values_are_stored_as_missing(client, run, alice):
    body = (
        '{"points": [{"key": "a", "step": 0, "value": null},'
        ' {"key": "b", "step": 0, "value": NaN}]}'
    )

    assert send(client, alice, run, body).status_code == 200
    assert stored(run) == [("a", 0, None), ("b", 0, None)]


def test_the_teammate_may_not_write_into_the_owners_run(client, run, bob):
    response = send(client, bob, run, BATCH)

    assert response.status_code == 403
    assert stored(run) == []


def test_an_outsider_may_not_write(client, run):
    response = client.post(
        f"/api/v1/runs/{run.id}/metrics", {"points": []}, content_type="application/json"
    )

    assert response.status_code == 401


def test_writing_into_an_unknown_run_gets_404(client, run, alice):
    run.id = 987654
    assert send(client, alice, run, BATCH).status_code == 404


@pytest.mark.parametrize(
    "point, field",
    [
        ({"step": 1, "value": 1}, "points[1].key"),
        ({"key": "", "step": 1, "value": 1}, "points[1].key"),
        ({"key": "k" * 201, "step": 1, "value": 1}, "points[1].key"),
        ({"key": "k", "step": -1, "value": 1}, "points[1].step"),
        ({"key": "k", "step": 1.5, "value": 1}, "points[1].step"),
        ({"key": "k", "step": "3", "value": 1}, "points[1].step"),
        ({"key": "k", "step": True, "value": 1}, "points[1].step"),
        ({"key": "k", "step": 2**31, "value": 1}, "points[1].step"),
        ({"key": "k", "step": 1, "value": "high"}, "points[1].value"),
        ({"key": "k", "step": 1, "value": False}, "points[1].value"),
        ({"key": "k", "step": 1, "value": 10**400}, "points[1].value"),
        (["k", 1, 1.0], "points[1]"),
    ],
)
def test_a_bad_point_gets_400_naming_it_and_nothing_is_stored(client, run, alice, point, field):
    response = send(client, alice, run, [BATCH[0], point])

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert stored(run) == []


def test_points_must_be_a_list(client, run, alice):
    response = client.post(
        f"/api/v1/runs/{run.id}/metrics",
        {"points": {"key": "k"}},
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 400
    assert "points" in response.json()["fields"]


def test_more_points_than_the_cap_get_413(client, run, alice, settings):
    settings.TROUPE_API_MAX_POINTS = 2

    response = send(client, alice, run, BATCH)

    assert response.status_code == 413
    assert "more than 2 per request" in response.json()["error"]
    assert stored(run) == []


def test_a_body_over_the_size_limit_gets_413(client, run, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    assert send(client, alice, run, BATCH).status_code == 413


def test_the_teammate_reads_series(client, run, alice, bob):
    send(client, alice, run, BATCH)

    response = client.get(f"/api/v1/runs/{run.id}/metrics?keys=train/reward", headers=bearer(bob))

    assert response.json() == {"series": {"train/reward": {"steps": [1, 2], "values": [0.25, 0.5]}}}


def test_every_key_comes_back_when_none_is_named(client, run, alice):
    send(client, alice, run, BATCH)

    series = client.get(f"/api/v1/runs/{run.id}/metrics", headers=bearer(alice)).json()["series"]

    assert sorted(series) == ["eval/accuracy", "train/reward"]


def test_max_points_downsamples_keeping_the_ends_and_the_extremes(client, run, alice):
    points = [{"key": "k", "step": s, "value": float(s % 50)} for s in range(1000)]
    points[500]["value"] = 99.0  # a spike that plain striding would miss
    send(client, alice, run, points)

    url = f"/api/v1/runs/{run.id}/metrics?keys=k&max_points=20"
    series = client.get(url, headers=bearer(alice)).json()["series"]["k"]

    assert len(series["steps"]) <= 20
    assert series["steps"][0] == 0 and series["steps"][-1] == 999
    assert 99.0 in series["values"]
    everything = client.get(url.replace("=20", "=0"), headers=bearer(alice)).json()
    assert len(everything["series"]["k"]["steps"]) == 1000


def test_three_points_keep_the_peak_between_the_ends(client, run, alice):
    values = [0.1, 0.2, 0.6, 0.3, 0.0]  # the peak is interior, the cliff is the last point
    send(client, alice, run, [{"key": "k", "step": s, "value": v} for s, v in enumerate(values)])

    url = f"/api/v1/runs/{run.id}/metrics?keys=k&max_points=3"
    series = client.get(url, headers=bearer(alice)).json()["series"]["k"]

    assert series == {"steps": [0, 2, 4], "values": [0.1, 0.6, 0.0]}


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_max_points_gets_400(client, run, alice, value):
    response = client.get(
        f"/api/v1/runs/{run.id}/metrics?max_points={value}", headers=bearer(alice)
    )

    assert response.status_code == 400
    assert "max_points" in response.json()["fields"]


def test_an_outsider_may_not_read_series(client, run):
    assert client.get(f"/api/v1/runs/{run.id}/metrics").status_code == 401


def test_many_runs_are_read_in_one_request(client, run, alice, bob):
    other = make_experiment(alice, "Another", runs=2)
    second, silent = other.runs.order_by("id")
    send(client, alice, run, BATCH)
    send(
        client, alice, second, [{"key": "train/reward", "step": s, "value": s} for s in range(100)]
    )

    url = f"/api/v1/metrics?runs={second.id},{run.id},{silent.id}&keys=train/reward&max_points=10"
    response = client.get(url, headers=bearer(bob))

    assert response.status_code == 200
    runs = response.json()["runs"]
    assert list(runs) == [str(second.id), str(run.id), str(silent.id)]  # in the order asked
    assert runs[str(run.id)] == {"train/reward": {"steps": [1, 2], "values": [0.25, 0.5]}}
    downsampled = runs[str(second.id)]["train/reward"]
    assert len(downsampled["steps"]) <= 10 and downsampled["steps"][-1] == 99
    assert runs[str(silent.id)] == {}  # logged nothing: an empty entry, not a missing one
    one = client.get(
        f"/api/v1/runs/{second.id}/metrics?keys=train/reward&max_points=10", headers=bearer(bob)
    ).json()["series"]
    assert runs[str(second.id)] == one  # the same read as the one-run endpoint


@pytest.mark.parametrize("runs", ["", ",", "3,x", "-1", ",".join(["1"] * 1001)])
def test_a_bad_runs_list_gets_400_naming_it(client, alice, runs):
    response = client.get(f"/api/v1/metrics?runs={runs}", headers=bearer(alice))

    assert response.status_code == 400
    assert "comma-separated run ids" in response.json()["fields"]["runs"]


def test_unknown_runs_get_404_naming_them(client, run, alice):
    response = client.get(f"/api/v1/metrics?runs={run.id},99998,99999", headers=bearer(alice))

    assert response.status_code == 404
    assert "99998, 99999" in response.json()["error"]


def test_every_run_of_an_experiment_is_read_in_one_request(client, alice):
    experiment = make_experiment(alice, "Matrix", runs=3)
    runs = list(experiment.runs.order_by("id"))
    for value, run in enumerate(runs):
        send(client, alice, run, [{"key": "eval/accuracy", "step": 0, "value": value}])

    url = f"/api/v1/metrics?experiment={experiment.id}&keys=eval/accuracy"
    got = client.get(url, headers=bearer(alice)).json()["runs"]

    assert got == {
        str(run.id): {"eval/accuracy": {"steps": [0], "values": [float(value)]}}
        for value, run in enumerate(runs)
    }


@pytest.mark.parametrize("query", ["", "runs=1&experiment=1", "experiment=x"])
def test_runs_or_an_experiment_must_be_named(client, alice, query):
    response = client.get(f"/api/v1/metrics?{query}", headers=bearer(alice))

    assert response.status_code == 400
    assert set(response.json()["fields"]) & {"runs", "experiment"}


def test_an_unknown_experiment_gets_404(client, alice):
    assert client.get("/api/v1/metrics?experiment=99999", headers=bearer(alice)).status_code == 404


def test_an_outsider_may_not_read_many_runs(client, run):
    assert client.get(f"/api/v1/metrics?runs={run.id}").status_code == 401
