"""The gradient drill-down through the API: `order=grad_share:<role>` lists a step's episodes
by their share of that role's gradient, largest first, those without one last; a bad order
is a 400 naming it."""

import json

import pytest

from tests.people import bearer
from tests.webapp.test_api_episodes import record
from webapp.episodes import store

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(run):
    shares = [
        {"solver": 0.1},
        {"solver": 0.5},
        {},  # a role whose gradient was zero at the step: no share
        {"solver": -0.2},
    ]
    records = [record("train", 3, i, grad_share=shares[i]) for i in range(4)]
    records.append(record("train", 4, 0, grad_share={"solver": 0.9}))
    records.append(record("eval", 3, 0))
    store.write_episodes(run.id, records)
    return run


def get(client, user, run, query):
    return client.get(f"/api/v1/runs/{run.id}/{query}", headers=bearer(user))


def test_a_steps_episodes_ordered_by_their_share_of_a_roles_gradient(client, stored, alice):
    response = get(client, alice, stored, "episodes?step=3&kind=train&order=grad_share:solver")
    assert response.status_code == 200
    body = response.json()
    assert [e["index"] for e in body["episodes"]] == [1, 0, 3, 2]
    assert body["episodes"][0]["grad_share"] == {"solver": 0.5}
    # Paged after ordering; the whole run: step 4's 0.9 leads, the evaluation comes last.
    page = get(client, alice, stored, "episodes?order=grad_share:solver&per_page=2&page=1")
    assert [(e["step"], e["index"]) for e in page.json()["episodes"]] == [(4, 0), (3, 1)]
    assert page.json()["count"] == 6
    lines = get(client, alice, stored, "episodes.jsonl?step=3&order=grad_share:solver")
    body = b"".join(lines.streaming_content).decode().splitlines()
    assert [(json.loads(x)["kind"], json.loads(x)["index"]) for x in body] == [
        ("train", 1),
        ("train", 0),
        ("train", 3),
        ("eval", 0),  # without a share: stored (step, kind, index) order
        ("train", 2),
    ]


@pytest.mark.parametrize("order", ["reward", "grad_share", "grad_share:", "share:solver"])
def test_a_bad_order_is_named(client, stored, alice, order):
    response = get(client, alice, stored, f"episodes?order={order}")
    assert response.status_code == 400
    assert "order" in response.json()["fields"]
