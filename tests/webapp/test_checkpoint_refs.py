"""Across the web boundary a checkpoint is a reference, never a path: a mix source and a new
experiment's `init_from` are `RUN:NAME`, resolved on the server under one rule (the run's
owner or staff may take its weights), and a refusal names the accepted forms, never the
server's disk (docs/security.md)."""

from pathlib import Path

import pytest

from tests.branches import give_checkpoints
from tests.people import bearer, make_experiment
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Experiment

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return tmp_path / "data"


def trained_run(owner, data: Path, name: str):
    run = make_experiment(owner, name=name, workflow="voting", sharing="per_role").runs.get()
    return give_checkpoints(run, data / "runs" / str(run.id), best=4, steps=(4, 6))


@pytest.fixture
def alices(alice, data):
    return trained_run(alice, data, "Alice's")


@pytest.fixture
def bobs(bob, data):
    return trained_run(bob, data, "Bob's")


def mix(client, run, user, sources):
    return client.post(
        f"/api/v1/runs/{run.id}/swap-jobs",
        {"kind": "mix", "sources": sources},
        content_type="application/json",
        headers=bearer(user),
    )


def test_a_mix_source_from_another_run_is_a_reference_and_the_job_stores_no_path(
    client, alice, alices, data
):
    second = trained_run(alice, data, "Alice's second")
    response = mix(client, alices, alice, {"aggregator": f"{second.id}:best"})
    assert response.status_code == 201, response.json()
    sources = SwapJob.objects.get().plan["evaluations"][0]["sources"]
    assert sources == {"generator": "base", "aggregator": f"{second.id}:best"}
    assert str(data) not in response.content.decode()


def test_another_users_run_is_no_mix_source(client, alice, alices, bobs):
    response = mix(client, alices, alice, {"aggregator": f"{bobs.id}:best"})
    assert response.status_code == 403
    assert "only its owner or staff" in response.json()["error"]
    assert not SwapJob.objects.exists()


@pytest.mark.parametrize(
    "source",
    [
        "{runs}/{bob}/checkpoints/step-000004",
        "{runs}/{alice}/artifacts/checkpoints/step-000001",
        "../{bob}/checkpoints/step-000004",
        "step-000004/../../{bob}",
        "x" * 300,
        "step-4\0",
    ],
)
def test_a_path_is_no_mix_source_and_the_refusal_names_no_server_path(
    client, alice, alices, bobs, data, source
):
    source = source.format(runs=data / "runs", bob=bobs.id, alice=alices.id)
    response = mix(client, alices, alice, {"aggregator": source})
    assert response.status_code == 400
    assert str(data) not in response.content.decode()
    assert not SwapJob.objects.exists()


def new_experiment(client, user, init_from):
    config = {"workflow": "voting", "sharing": "per_role", "init_from": init_from}
    return client.post(
        "/api/v1/experiments",
        {"name": "From a checkpoint", "preset": "cpu-demo", "config": config},
        content_type="application/json",
        headers=bearer(user),
    )


def test_init_from_names_a_checkpoint_by_reference_and_gets_a_frozen_copy(
    client, alice, alices, data
):
    response = new_experiment(client, alice, f"{alices.id}:step-4")
    assert response.status_code == 201, response.json()
    (run,) = Experiment.objects.get(name="From a checkpoint").runs.all()
    assert run.config["init_from"].startswith("branch-points/")  # no folder of the server
    start = data / run.config["init_from"]
    assert start.parent.parent.parent == data / "branch-points"
    assert (start / "state.pt").read_bytes() == b"state of step 4"


@pytest.mark.parametrize(
    "init_from",
    [
        "{runs}/{alice}/checkpoints/step-000004",
        "{runs}/{alice}/artifacts/checkpoints/step-000001",
        "/etc",
        "{alice}:../../x",
        "{alice}:step-5",
    ],
)
def test_init_from_refuses_a_path_or_a_checkpoint_the_run_does_not_keep(
    client, alice, alices, data, init_from
):
    response = new_experiment(client, alice, init_from.format(runs=data / "runs", alice=alices.id))
    assert response.status_code == 400
    assert "config.init_from" in response.json()["fields"]
    assert str(data) not in response.content.decode()
    assert not Experiment.objects.filter(name="From a checkpoint").exists()


def test_init_from_another_users_run_is_refused(client, alice, bobs):
    response = new_experiment(client, alice, f"{bobs.id}:best")
    assert response.status_code == 403
    assert not Experiment.objects.filter(name="From a checkpoint").exists()


@pytest.mark.parametrize(
    "init_from", ["999999:best", "{alice}:nosuch", "abc", "/etc", "{bob}:best"]
)
def test_the_form_names_a_bad_init_from_beside_the_field(
    client, alice, alices, bobs, settings, init_from
):
    """Each of these once gave a bare server error page."""
    from tests.runs import form_data

    client.force_login(alice)
    text = init_from.format(alice=alices.id, bob=bobs.id)
    fields = form_data(init_from=text, workflow=["voting"], sharing=["per_role"], seeds="0")

    response = client.post("/experiments/new/", fields)

    assert response.status_code == 200
    page = response.content.decode()
    block = page[page.index('for="id_init_from"') :]
    assert 'class="field-error"' in block[: block.index("</div>")]
    assert str(settings.DATA_DIR) not in page
    assert not Experiment.objects.filter(name=fields["name"]).exists()
