"""A name too long for the disk, or a NUL, is a clear 4xx wherever a path part arrives:
MLflow's artifact GET, PUT and listings, the run page's artifact links, swap-job sources and
the run page's mix form — never a 500 (ENAMETOOLONG, "embedded null byte")."""

import json

import pytest

from tests.branches import give_checkpoints
from tests.people import bearer, make_experiment
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"
LONG = "x" * 300


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


@pytest.fixture
def mlflow_run(client, alice) -> str:
    """The artifact root of a new MLflow run of alice's, as a path."""
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=bearer(alice),
    )
    uri = response.json()["run"]["info"]["artifact_uri"]
    return uri.removeprefix("mlflow-artifacts:")


@pytest.mark.parametrize("tail", [f"/{LONG}", f"/{LONG}/a.txt", "/a/" + "b/" * 600 + "c"])
def test_a_name_too_long_is_a_400_for_every_artifact_request(client, alice, mlflow_run, tail):
    headers = bearer(alice)
    path = mlflow_run + tail
    answers = [
        client.put(
            ARTIFACTS + path, b"x", content_type="application/octet-stream", headers=headers
        ),
        client.get(ARTIFACTS + path, headers=headers),
        client.get(ARTIFACTS, {"path": path}, headers=headers),
        client.get(
            API + "artifacts/list",
            {"run_id": mlflow_run.split("/")[2], "path": tail.strip("/")},
            headers=headers,
        ),
    ]
    assert [a.status_code for a in answers] == [400] * 4
    assert all(a.json()["error_code"] == "INVALID_PARAMETER_VALUE" for a in answers)


@pytest.mark.parametrize("path", ["a%00b.txt", f"{LONG}.png", f"{LONG}/a.txt"])
def test_the_run_pages_artifact_links_answer_404_for_a_nul_or_a_long_name(
    client, alice, mlflow_run, path
):
    client.force_login(alice)
    run = Run.objects.get()
    for kind in ("artifacts", "artifact-images"):
        response = client.get(f"/runs/{run.id}/{kind}/{path}")
        assert response.status_code == 404, kind


@pytest.fixture
def trained(alice, data_dir):
    run = make_experiment(alice, workflow="voting", sharing="per_role").runs.get()
    return give_checkpoints(run, data_dir / "runs" / str(run.id), best=4, steps=(4, 6))


# A checkpoint-shaped path with a part too long for the disk: `{runs}` is the runs folder.
LONG_PATH = "{runs}/1/" + LONG + "/step-000001"


@pytest.mark.parametrize(
    "source", [LONG, f"7:{LONG}", f"step-{'9' * 300}", "best\0", f"{LONG}:best", LONG_PATH]
)
def test_a_swap_job_source_too_long_or_with_a_nul_is_a_400(
    client, alice, trained, source, data_dir
):
    response = client.post(
        f"/api/v1/runs/{trained.id}/swap-jobs",
        {
            "kind": "mix",
            "sources": {"aggregator": source.replace("{runs}", str(data_dir / "runs"))},
        },
        content_type="application/json",
        headers=bearer(alice),
    )
    assert response.status_code == 400


@pytest.mark.parametrize("source", [LONG, f"step-{'9' * 300}", "best\0", LONG_PATH])
def test_the_mix_form_says_what_is_wrong_with_a_long_or_nul_source(
    client, alice, trained, source, data_dir
):
    client.force_login(alice)
    source = source.replace("{runs}", str(data_dir / "runs"))
    response = client.post(f"/runs/{trained.id}/mix/", {"role_aggregator": source}, follow=True)
    assert response.status_code == 200
    assert "Not queued" in response.content.decode()
