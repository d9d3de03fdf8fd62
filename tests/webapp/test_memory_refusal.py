"""A run that cannot fit on the GPU is refused before anything is queued, by the form and the
API alike, with trainer.config's message (trainer/memory.py)."""

import json

import pytest
from django.utils.html import escape

from tests.people import bearer
from tests.runs import form_data
from trainer.config import ConfigError, make_config
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db

TOO_BIG = dict(finetune="full", sharing="per_role", workflow="voting", model="Qwen/Qwen3-4B")


def message() -> str:
    with pytest.raises(ConfigError) as caught:
        make_config("paper", **TOO_BIG)
    return caught.value.errors["memory"]


def test_the_form_refuses_it_at_the_top_with_the_configs_message(client, bob):
    client.force_login(bob)
    data = form_data(
        finetune="full",
        workflow=["voting"],
        sharing=["per_role"],
        model=["Qwen/Qwen3-4B"],
        seeds="0",
        device="cuda",
        micro_batch_size="16",
        max_new_tokens="2048",
        rollout_batch="32",
    )
    html = client.post("/experiments/new/", data).content.decode()

    assert escape(message()) in html
    assert not Run.objects.exists()


def test_the_api_refuses_it_with_the_same_message(client, alice):
    body = {"name": "too big", "preset": "paper", "config": TOO_BIG}

    response = client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 400
    assert message() in json.dumps(response.json())
    assert not Run.objects.exists()


def test_a_gpu_size_nobody_measured_is_said_to_be_assumed(monkeypatch):
    # Once, on a machine with no GPU, the refusal said "the GPU has 141 GiB", a default.
    monkeypatch.delenv("TROUPE_GPU_MEMORY_GB", raising=False)
    assert "assumed to have 141 GiB" in message() and "the GPU has" not in message()
    monkeypatch.setenv("TROUPE_GPU_MEMORY_GB", "80")
    assert "the workers' GPUs have 80 GiB (TROUPE_GPU_MEMORY_GB)" in message()
