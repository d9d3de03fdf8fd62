"""Malformed input to the JSON API gets a JSON 400 naming what is wrong, never a server error:
bodies nested too deeply, NUL characters and lone surrogates in strings or keys (PostgreSQL
can store neither), query parameters holding NUL, and values too big for their columns."""

import json
import random

import pytest

from tests.people import bearer
from webapp.experiments.models import MetricPoint, Run
from webapp.jsonapi.http import MAX_DEPTH, _nested_deeper_than_limit

pytestmark = pytest.mark.django_db


def post(client, user, url, body):
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(url, text, content_type="application/json", headers=bearer(user))


def fields_of(response, status=400):
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    return response.json().get("fields", {})


def test_a_body_nested_a_thousand_deep_gets_400(client, run, alice):
    body = '{"points": ' + "[" * 1000 + "]" * 1000 + "}"

    response = post(client, alice, f"/api/v1/runs/{run.id}/metrics", body)

    assert response.status_code == 400
    assert "nested" in response.json()["error"]


def test_a_body_nested_deeper_than_the_limit_gets_400_even_when_python_could_read_it(
    client, experiment, alice
):
    deep = 0
    for _ in range(200):
        deep = {"a": deep}

    response = post(
        client,
        alice,
        "/api/v1/runs",
        {"name": "x", "experiment": experiment.id, "config": {"notes": deep}},
    )

    assert response.status_code == 400
    assert "nested" in response.json()["error"]
    assert not Run.objects.filter(name="x").exists()


def nested(depth: int):
    """A value of exactly `depth` levels of objects and arrays, alternating."""
    value = 0
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


def test_the_depth_limit_is_exact(client, experiment, alice):
    def create(depth):
        # The body object and "config" are two levels: the rest is the config's value.
        body = {"name": "deep", "experiment": experiment.id, "config": {"n": nested(depth - 2)}}
        return post(client, alice, "/api/v1/runs", body).status_code

    assert (create(MAX_DEPTH), create(MAX_DEPTH + 1)) == (201, 400)


def test_brackets_inside_strings_are_not_nesting(client, experiment, alice):
    text = '[{"\\' * 40
    body = {"name": text, "experiment": experiment.id, "config": {text: "é" + text}}

    response = post(client, alice, "/api/v1/runs", body)

    assert response.status_code == 201
    assert Run.objects.get(id=response.json()["id"]).name == text


def depth_of(value) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice('[]{}"\\aé \n\x00') for _ in range(rng.randint(0, 5)))


def random_value(rng: random.Random, depth: int):
    """A value exactly `depth` deep: a spine of containers, each with a few shallow siblings;
    strings full of brackets, quotes and escapes everywhere."""
    if depth == 0:
        return rng.choice([random_text(rng), 1, None, True, 2.5])
    items = [random_value(rng, rng.randint(0, min(depth - 1, 2))) for _ in range(rng.randint(0, 2))]
    items.insert(rng.randint(0, len(items)), random_value(rng, depth - 1))
    if rng.random() < 0.5:
        return items
    return {f"{random_text(rng)}{i}": item for i, item in enumerate(items)}


def test_the_fast_depth_check_agrees_with_walking_the_value():
    rng = random.Random(15)
    values = [random_value(rng, rng.randint(1, 2 * MAX_DEPTH)) for _ in range(300)]
    deep = sum(depth_of(v) > MAX_DEPTH for v in values)
    assert 60 < deep < 240  # both answers are well represented

    for value in values:
        for ascii_only in (True, False):
            text = json.dumps(value, ensure_ascii=ascii_only)
            assert _nested_deeper_than_limit(text) == (depth_of(value) > MAX_DEPTH), text


def test_a_nul_in_a_metric_key_is_named_and_nothing_is_stored(client, run, alice):
    points = [{"key": "ok", "step": 1, "value": 1.0}, {"key": "a\x00b", "step": 1, "value": 1.0}]

    response = post(client, alice, f"/api/v1/runs/{run.id}/metrics", {"points": points})

    assert fields_of(response) == {"points[1].key": "must not contain NUL (\\u0000) characters"}
    assert not MetricPoint.objects.filter(run=run).exists()


def test_a_utf16_body_is_checked_as_closely(client, run, alice):
    points = [{"key": "a\x00b", "step": 1, "value": 1.0}]
    body = json.dumps({"points": points}).encode("utf-16")  # json.loads reads UTF-16 too

    response = client.post(
        f"/api/v1/runs/{run.id}/metrics",
        body,
        content_type="application/json",
        headers=bearer(alice),
    )

    assert fields_of(response) == {"points[0].key": "must not contain NUL (\\u0000) characters"}


def test_a_lone_surrogate_in_a_run_name_is_named(client, experiment, alice):
    response = post(client, alice, "/api/v1/runs", {"name": "a\ud800", "experiment": experiment.id})

    assert fields_of(response) == {"name": "must not contain lone surrogates (\\ud800-\\udfff)"}


def test_a_surrogate_pair_is_a_character_like_any_other(client, experiment, alice):
    response = post(
        client, alice, "/api/v1/runs", {"name": "\U0001f600", "experiment": experiment.id}
    )

    assert response.status_code == 201
    assert Run.objects.get(id=response.json()["id"]).name == "\U0001f600"


def test_a_nul_in_a_config_key_names_the_object_holding_it(client, alice):
    body = {"name": "e", "preset": "cpu-demo", "config": {"see\x00d": 1}}

    response = post(client, alice, "/api/v1/experiments", body)

    assert list(fields_of(response)) == ["config"]


def test_a_nul_in_an_experiment_description_is_named(client, alice):
    body = {"name": "e", "preset": "cpu-demo", "description": "\x00"}

    assert list(fields_of(post(client, alice, "/api/v1/experiments", body))) == ["description"]


def test_a_nul_in_a_query_parameter_is_named(client, run, alice):
    response = client.get(f"/api/v1/runs/{run.id}/metrics?keys=%00", headers=bearer(alice))

    assert fields_of(response) == {"keys": "must not contain NUL (\\u0000) characters"}


def test_a_nul_in_the_many_runs_read_is_named_too(client, run, alice):
    response = client.get(f"/api/v1/metrics?runs={run.id}&keys=a%00", headers=bearer(alice))

    assert list(fields_of(response)) == ["keys"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workflow", "w" * 41),
        ("task", "t" * 41),
        ("sharing", "s" * 41),
        ("model", "m" * 201),
        ("seed", 2**31),
        ("seed", -1),
        ("steps", 2**31),
        ("seed", 10**40),
    ],
)
def test_an_external_run_with_a_value_too_big_for_its_column_gets_400(
    client, experiment, alice, field, value
):
    body = {"name": "big", "experiment": experiment.id, "config": {field: value}}

    response = post(client, alice, "/api/v1/runs", body)

    assert list(fields_of(response)) == [f"config.{field}"]
    assert not Run.objects.filter(name="big").exists()


def test_an_external_run_at_the_column_limits_is_stored(client, experiment, alice):
    config = {"model": "m" * 200, "seed": 2**31 - 1, "steps": 2**31 - 1, "workflow": "w" * 40}
    body = {"name": "edge", "experiment": experiment.id, "config": config}

    response = post(client, alice, "/api/v1/runs", body)

    assert response.status_code == 201
    run = Run.objects.get(id=response.json()["id"])
    assert (run.seed, run.total_steps, len(run.model)) == (2**31 - 1, 2**31 - 1, 200)


@pytest.mark.parametrize(
    ("config", "matrix", "named"),
    [
        ({"seed": 2**31}, {}, "config.seed"),
        ({"steps": 2**31}, {}, "config.steps"),
        ({}, {"seed": [0, 2**31]}, "matrix.seed"),
        ({"model": "./" + "m" * 199}, {}, "config.model"),
    ],
)
def test_an_experiment_with_a_value_too_big_for_its_column_gets_400(
    client, alice, config, matrix, named
):
    body = {"name": "e", "preset": "cpu-demo", "config": config, "matrix": matrix}

    response = post(client, alice, "/api/v1/experiments", body)

    assert named in fields_of(response)


# "²".isdigit() is true but int("²") raises: each of these once gave a server error.
SUPERSCRIPT_IDS = [
    "/api/v1/metrics?runs=²",
    "/experiments/new/?run=²",
    "/experiments/new/?experiment=²",
    "/alerts/?run=²",
    "/api/v1/alerts?run=²",
    "/api/v1/runs/{run}/episodes?step=²",
    "/runs/{run}/episodes/?step=²",
    "/explore/runs.json?runs=²",
    "/api/2.0/mlflow/runs/get?run_id=²",
    "/api/2.0/mlflow/experiments/get?experiment_id=²",
    "/api/2.0/mlflow/experiments/search?view_type=²",
]


@pytest.mark.parametrize("url", SUPERSCRIPT_IDS)
def test_a_superscript_digit_is_no_id(client, run, alice, url):
    client.force_login(alice)

    response = client.get(url.format(run=run.id), headers=bearer(alice))

    assert response.status_code < 500, response.content[:300]


def test_no_web_code_reads_numbers_with_isdigit():
    # isdecimal() is exactly what int() and float() take; isdigit() is wider.
    from pathlib import Path

    webapp = Path(__file__).resolve().parents[2] / "webapp"
    users = [str(p) for p in webapp.rglob("*.py") if ".isdigit()" in p.read_text()]
    assert users == []


# int() refuses more than 4,300 digits: each of these once gave a server error.
LONG = "1" * 5000
LONG_NUMBERS = [
    f"/api/v1/metrics?runs={LONG}",
    f"/experiments/new/?run={LONG}",
    f"/alerts/?run={LONG}",
    f"/explore/runs.json?runs={LONG}",
    f"/api/2.0/mlflow/runs/get?run_id={LONG}",
    f"/api/2.0/mlflow/experiments/get?experiment_id={LONG}",
]


@pytest.mark.parametrize("url", LONG_NUMBERS)
def test_a_number_too_long_for_int_is_no_id(client, run, alice, url):
    client.force_login(alice)

    response = client.get(url, headers=bearer(alice))

    assert response.status_code < 500, response.content[:300]
