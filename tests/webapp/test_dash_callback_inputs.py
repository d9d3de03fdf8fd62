"""Every panel callback answers a wrongly typed input with a 4xx, never a 500: each input and
state of each callback is sent, through Dash's own endpoint, a huge integer, a dict, a nested
list, -1, a long string and a NUL, the others left empty (`callback_inputs.py` checks them
where they enter)."""

import json

import pytest

from webapp.dashboards import data
from webapp.dashboards.app import app

pytestmark = pytest.mark.django_db

BAD = [10**30, {"a": 1}, [[1], {"b": 2}], -1, "x" * 5000, "a\0b", 1.5, True, [-1, 10**30]]


def _spec(text: str):
    """A component id as the endpoint spells it: a pattern-matching id is JSON."""
    return json.loads(text) if text.startswith("{") else text


def _outputs(key: str):
    """The outputs a callback key names (`..a.b...c.d..` for several, `a.b` for one)."""
    many = key.startswith("..")
    parts = key.strip(".").split("...") if many else [key]
    specs = []
    for part in parts:
        ident, _, prop = part.rpartition(".")
        specs.append({"id": _spec(ident), "property": prop.split("@")[0]})
    return specs if many else specs[0]


def _calls():
    client = app.server.test_client()
    client.get("/")  # Dash builds its callback map at the first request
    for key, callback in app.callback_map.items():
        slots = [("inputs", i) for i in callback["inputs"]] + [
            ("state", i) for i in callback.get("state", [])
        ]
        for where, slot in slots:
            for value in BAD:
                yield key, callback, where, slot, value


def _body(key, callback, where, slot, value):
    def entries(kind):
        return [
            {"id": _spec(s["id"]), "property": s["property"], "value": value if s is slot else None}
            for s in callback.get(kind, [])
        ]

    return {
        "output": key,
        "outputs": _outputs(key),
        "inputs": entries("inputs"),
        "state": entries("state"),
        "changedPropIds": [f"{slot['id']}.{slot['property']}"],
    }


def test_no_callback_answers_a_wrongly_typed_input_with_a_500(alice):
    client = app.server.test_client()
    failures, total = [], 0
    with data.viewing_as(alice):
        for key, callback, where, slot, value in list(_calls()):
            response = client.post(
                "/_dash-update-component", json=_body(key, callback, where, slot, value)
            )
            total += 1
            if response.status_code >= 500:
                failures.append(f"{slot['id']}.{slot['property']}={str(value)[:20]!r}")
    assert total > 100
    assert failures == []


def test_well_typed_inputs_still_reach_the_callbacks(alice):
    client = app.server.test_client()
    client.get("/")
    statuses = []
    with data.viewing_as(alice):
        for key, callback in app.callback_map.items():
            if "callback" not in callback:
                continue
            slot = callback["inputs"][0]
            body = _body(key, callback, "inputs", slot, None)
            statuses.append(client.post("/_dash-update-component", json=body).status_code)
    assert len(statuses) > 20
    assert 400 not in statuses and not [s for s in statuses if s >= 500]
    assert statuses.count(200) > 10
