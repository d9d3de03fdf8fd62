"""A run needing more GPUs than any live worker has is refused by the form and the API, with
both numbers; with no worker seen it is accepted with a warning
(webapp/runs/worker_gpus.py)."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from tests.people import bearer
from tests.runs import form_data
from webapp.experiments.models import Run, WorkerSeen
from webapp.runs.worker_gpus import advertise, largest_gpus

pytestmark = pytest.mark.django_db

REFUSAL = "the run needs 4 GPUs (world_size 4) but the largest worker has 2 (TROUPE_WORKER_GPUS)"


def post(client, user, world_size: int):
    body = {"name": "wide", "preset": "cpu-demo", "config": {"world_size": world_size}}
    return client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(user),
    )


def test_only_workers_seen_lately_count():
    assert largest_gpus() is None
    advertise("a@host", 2)
    advertise("b@host", 8)
    WorkerSeen.objects.filter(name="b@host").update(seen=timezone.now() - timedelta(hours=1))
    assert largest_gpus() == 2
    advertise("b@host", 8)  # seen again: counts again, one row per worker
    assert largest_gpus() == 8 and WorkerSeen.objects.count() == 2


def test_the_api_refuses_a_run_wider_than_every_worker(client, alice):
    advertise("a@host", 2)
    response = post(client, alice, 4)
    assert response.status_code == 400
    assert REFUSAL in json.dumps(response.json())
    assert not Run.objects.exists()
    response = post(client, alice, 2)
    assert response.status_code == 201 and "warnings" not in response.json()


def test_the_form_refuses_it_beside_world_size(client, bob):
    advertise("a@host", 2)
    client.force_login(bob)
    html = client.post("/experiments/new/", form_data(world_size="4")).content.decode()
    assert escape(REFUSAL) in html
    assert not Run.objects.exists()


def test_with_no_worker_seen_the_run_is_accepted_with_a_warning(client, alice, bob):
    response = post(client, alice, 4)
    assert response.status_code == 201
    (warning,) = response.json()["warnings"]
    assert "No worker has reported its GPUs yet" in warning and "world_size 4" in warning
    client.force_login(bob)
    response = client.post("/experiments/new/", form_data(world_size="4"), follow=True)
    assert "No worker has reported its GPUs yet" in response.content.decode()
