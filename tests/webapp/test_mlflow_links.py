"""Where the MLflow client's printed links lead (`webapp/tracking/link_views.py`): a run by its
MLflow id or Troupe number to its page, an experiment to its page ("0" to the list until
something is logged into it), a stranger to sign in first, an unknown id to a 404."""

import json

import pytest

from tests.people import bearer
from webapp.experiments.models import Experiment

pytestmark = pytest.mark.django_db


def mlflow_run(client, user) -> dict:
    response = client.post(
        "/api/2.0/mlflow/runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=bearer(user),
    )
    return response.json()["run"]


def test_a_run_link_leads_to_its_page_by_mlflow_id_or_number(client, alice, bob):
    run = mlflow_run(client, alice)
    number = next(t["value"] for t in run["data"]["tags"] if t["key"] == "troupe.run_id")
    client.force_login(bob)  # reading is open to every signed-in user
    for given in (run["info"]["run_id"], number):
        response = client.get(f"/mlflow/runs/{given}/")
        assert response.status_code == 302 and response["Location"] == f"/runs/{number}/"
    assert client.get("/mlflow/runs/0123456789abcdef0123456789abcdef/").status_code == 404


def test_an_experiment_link_leads_to_its_page(client, alice):
    client.force_login(alice)
    assert client.get("/mlflow/experiments/0/")["Location"] == "/experiments/"
    mlflow_run(client, alice)  # makes her "Default"
    default = Experiment.objects.get(owner=alice, name="Default")
    for given in ("0", str(default.id)):
        found = client.get(f"/mlflow/experiments/{given}/")
        assert found.status_code == 302 and found["Location"] == f"/experiments/{default.id}/"
    assert client.get("/mlflow/experiments/999999/").status_code == 404


def test_a_stranger_signs_in_first(client, alice):
    run = mlflow_run(client, alice)
    response = client.get("/mlflow/runs/" + run["info"]["run_id"] + "/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
