"""POST /api/v1/runs/<id>/branch: children from a kept checkpoint, owner or staff only, and
clear JSON errors naming what is wrong, with nothing queued."""

import pytest

from tests.branches import give_checkpoints
from tests.people import bearer
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


@pytest.fixture
def parent(run, tmp_path):
    return give_checkpoints(run, tmp_path / "runs" / str(run.id))


def post(client, user, run_id, body, **headers):
    return client.post(
        f"/api/v1/runs/{run_id}/branch",
        body,
        content_type="application/json",
        headers=bearer(user) if user else headers,
    )


def test_the_owner_branches_from_the_peak(client, parent, alice):
    body = {"checkpoint": "best", "branches": [{"lr_factor": 0.5}, {"coherence_lambda": 0.2}]}

    response = post(client, alice, parent.id, body)

    assert response.status_code == 201, response.json()
    answer = response.json()
    assert answer["parent"] == parent.id
    assert answer["checkpoint"] == {
        "name": "best-000002",
        "step": 2,
        "kind": "best",
        "peak": True,
        "accuracy": 0.5,
    }
    runs = answer["runs"]
    assert [r["lineage"]["intervention"] for r in runs] == [
        {},  # the control continuation, on unless "control": false
        {"lr": 0.0015},
        {"coherence_lambda": 0.2},
    ]
    assert all(
        r["lineage"]["parent"] == parent.id and r["lineage"]["branch_step"] == 2 for r in runs
    )
    assert runs[1]["config"]["lr"] == 0.0015 and runs[1]["status"] == "queued"
    assert runs[1]["config"]["init_from"].endswith("/checkpoints/best-000002")
    assert Run.objects.filter(parent=parent).count() == 3


def test_the_peak_at_the_last_step_is_branchable_through_the_api(client, run, alice, tmp_path):
    parent = give_checkpoints(run, tmp_path / "out", best=30, steps=(25, 30))

    response = post(client, alice, parent.id, {"checkpoint": "best", "branches": []})

    assert response.status_code == 201, response.json()
    assert response.json()["checkpoint"]["name"] == "best-000030"
    (child,) = response.json()["runs"]
    assert child["config"]["steps"] > 30
    assert child["config"]["init_from"].endswith("/checkpoints/best-000030")


def test_the_api_reads_a_checkpoint_by_name_and_the_control_can_be_left_out(client, parent, alice):
    body = {"checkpoint": "step-000004", "control": False, "branches": [{"kl_beta": 0.1}]}

    response = post(client, alice, parent.id, body)

    assert response.status_code == 201
    (child,) = Run.objects.filter(parent=parent)
    assert child.branch_step == 4 and child.intervention == {"kl_beta": 0.1}


def test_the_teammate_gets_403_and_nothing_is_queued(client, parent, bob):
    response = post(client, bob, parent.id, {"branches": [{"lr_factor": 0.5}]})

    assert response.status_code == 403
    assert "owner" in response.json()["error"]
    assert not Run.objects.filter(parent=parent).exists()


def test_staff_may_branch(client, parent, carol):
    assert post(client, carol, parent.id, {}).status_code == 201


def test_no_token_gets_401(client, parent):
    assert post(client, None, parent.id, {}).status_code == 401


def test_an_unknown_run_gets_404(client, alice):
    assert post(client, alice, 424242, {}).status_code == 404


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (
            {"branches": [{"lr_factor": 3}]},
            {"branches[0]": "lr_factor 3 is not a cut: give a factor between 0 and 1"},
        ),
        (
            {"branches": [{"sharing": "per_role"}]},
            {
                "branches[0]": "'sharing' is not a change a "
                "branch can make; one of: kl_beta, kl_beta_per_role, coherence_lambda, lr_factor"
            },
        ),
        ({"branches": {"lr_factor": 0.5}}, {"branches": "a list of changes, one a child"}),
        ({"control": "yes"}, {"control": "true or false"}),
        ({"checkpoint": 7}, {"checkpoint": "best, latest or a checkpoint name"}),
        (
            {"control": False},
            {"control": "nothing to queue: choose a change, or the control continuation"},
        ),
        (
            {"checkpoint": "best-000009"},
            {
                "checkpoint": "'best-000009' is not a kept checkpoint;"
                " kept: best-000002, step-000006, step-000004"
            },
        ),
    ],
)
def test_a_bad_request_gets_400_naming_the_field(client, parent, alice, body, fields):
    response = post(client, alice, parent.id, body)

    assert response.status_code == 400
    assert response.json()["fields"] == fields
    assert not Run.objects.filter(parent=parent).exists()


def test_a_trainer_config_error_names_the_config_field(client, parent, alice):
    response = post(client, alice, parent.id, {"branches": [{"kl_beta": -2}]})

    assert response.status_code == 400
    assert response.json()["fields"] == {"branches[0]": "kl_beta: -2.0 must be at least 0.0"}


def test_an_external_run_gets_409(client, parent, alice):
    Run.objects.filter(id=parent.id).update(external=True)

    response = post(client, alice, parent.id, {})

    assert response.status_code == 409
    assert "external" in response.json()["error"]
