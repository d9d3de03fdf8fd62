"""MLflow 3's logged models request by request: one is made only inside a run its caller may
change, finalized to a known status, found by name, its files uploaded under the model's URI
by the run's owner only, confined to the model, and deleted with the run."""

import json

import pytest

from tests.people import bearer
from trainer.checkpoint_index import find_checkpoint
from webapp.experiments.models import Run
from webapp.runs.run_files import delete_runs
from webapp.tracking import artifacts

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


def call(client, user, method, endpoint, body=None):
    if method == "get":
        return client.get(API + endpoint, headers=bearer(user))
    data = json.dumps(body or {})
    return getattr(client, method)(
        API + endpoint, data, content_type="application/json", headers=bearer(user)
    )


def error(response, status, code) -> str:
    assert response.status_code == status, response.content
    assert response.json()["error_code"] == code
    return response.json()["message"]


@pytest.fixture
def made(client, alice):
    run = call(client, alice, "post", "runs/create", {"experiment_id": "0"}).json()["run"]["info"]
    body = {
        "experiment_id": run["experiment_id"],
        "source_run_id": run["run_id"],
        "name": "checkpoint-10",
        "tags": [{"key": "k", "value": "v"}],
    }
    response = call(client, alice, "post", "logged-models", body)
    assert response.status_code == 200, response.content
    return run, response.json()["model"]["info"]


def test_a_model_is_made_in_a_run_and_finalized(client, alice, made):
    run, info = made
    assert info["status"] == "LOGGED_MODEL_PENDING" and info["source_run_id"] == run["run_id"]
    assert info["artifact_uri"].endswith(f"/models/{info['model_id']}/artifacts")
    done = call(
        client,
        alice,
        "patch",
        f"logged-models/{info['model_id']}",
        {"status": "LOGGED_MODEL_READY"},
    )
    assert done.json()["model"]["info"]["status"] == "LOGGED_MODEL_READY"
    error(
        call(client, alice, "patch", f"logged-models/{info['model_id']}", {"status": "DONE"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    found = call(
        client,
        alice,
        "post",
        "logged-models/search",
        {"experiment_ids": ["0"], "filter": "name = 'checkpoint-10'"},
    ).json()
    assert [m["info"]["model_id"] for m in found["models"]] == [info["model_id"]]


def test_a_model_needs_a_run_its_caller_may_change(client, alice, bob, made):
    run, info = made
    message = error(
        call(client, alice, "post", "logged-models", {"experiment_id": "0"}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "source_run_id" in message
    error(
        call(client, bob, "post", "logged-models", {"source_run_id": run["run_id"]}),
        403,
        "PERMISSION_DENIED",
    )
    error(
        call(
            client,
            bob,
            "patch",
            f"logged-models/{info['model_id']}",
            {"status": "LOGGED_MODEL_READY"},
        ),
        403,
        "PERMISSION_DENIED",
    )
    assert call(client, bob, "get", f"logged-models/{info['model_id']}").status_code == 200
    error(call(client, alice, "get", "logged-models/m-nope"), 404, "RESOURCE_DOES_NOT_EXIST")


def test_model_files_are_the_runs_owners_to_write_and_go_with_the_run(
    client, alice, bob, made, django_capture_on_commit_callbacks
):
    _, info = made
    root = info["artifact_uri"].removeprefix("mlflow-artifacts:")
    put = lambda user, tail, data=b"w": client.put(  # noqa: E731
        ARTIFACTS + root + tail, data, content_type="application/octet-stream", headers=bearer(user)
    )
    assert put(alice, "/model.safetensors", b"weights").status_code == 200
    error(put(bob, "/model.safetensors"), 403, "PERMISSION_DENIED")
    error(put(alice, "/../../x"), 400, "INVALID_PARAMETER_VALUE")
    got = client.get(ARTIFACTS + root + "/model.safetensors", headers=bearer(bob))
    assert b"".join(got.streaming_content) == b"weights"

    run = Run.objects.get()
    folder = artifacts.model_folder(run.id, info["model_id"])
    assert (folder / "model.safetensors").exists()
    with django_capture_on_commit_callbacks(execute=True):
        delete_runs(Run.objects.filter(id=run.id))
    assert not folder.exists()
    error(
        call(client, alice, "get", f"logged-models/{info['model_id']}"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )


def test_a_troupe_runs_best_checkpoint_is_a_read_only_model_of_it(
    client, alice, bob, run, tmp_path
):
    from webapp.metrics import write_points

    best = tmp_path / "out" / "checkpoints" / "best-000040"
    best.mkdir(parents=True)
    (best / "state.pt").write_bytes(b"weights")
    Run.objects.filter(id=run.id).update(checkpoint_dir=str(tmp_path / "out"))
    search = {"experiment_ids": [str(run.experiment_id)], "filter": f"source_run_id = '{run.id}'"}
    assert call(client, alice, "post", "logged-models/search", search).json() == {}
    write_points(run.id, [("ckpt/best_step", 40, 40.0), ("ckpt/best_accuracy", 40, 0.75)])

    found = call(client, alice, "post", "logged-models/search", search).json()["models"]
    assert len(found) == 1
    info, data = found[0]["info"], found[0]["data"]
    assert info["name"] == "troupe-best" and info["status"] == "LOGGED_MODEL_READY"
    assert info["source_run_id"] == str(run.id)
    assert info["artifact_uri"] == (
        f"mlflow-artifacts:/{run.experiment_id}/models/{info['model_id']}/artifacts"
    )  # served from the checkpoint's folder, no copy
    params = {p["key"]: p["value"] for p in data["params"]}
    assert params["checkpoint_step"] == "40"
    assert params["checkpoint"] == f"{run.id}:best-40"  # a reference, never a server path
    assert find_checkpoint(tmp_path / "out", "best-40").path == best  # what it names
    assert str(tmp_path) not in json.dumps(data) + json.dumps(info)
    metrics = {m["key"]: (m["value"], m["step"]) for m in data["metrics"]}
    assert metrics == {"checkpoint_step": (40.0, 40), "accuracy": (0.75, 40)}
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("state.pt"))

    got = call(client, bob, "get", f"logged-models/{info['model_id']}")  # reading is open
    assert got.status_code == 200 and got.json()["model"]["info"] == info
    error(
        call(client, alice, "delete", f"logged-models/{info['model_id']}"),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    Run.objects.filter(id=run.id).update(external=True)  # an MLflow-logged run: none
    assert call(client, alice, "post", "logged-models/search", search).json() == {}


def test_a_troupe_runs_best_checkpoint_downloads_read_only_as_a_model_and_a_folder(
    client, alice, bob, run, tmp_path
):
    from webapp.metrics import write_points

    best = tmp_path / "out" / "checkpoints" / "best-000040"
    best.mkdir(parents=True)
    (best / "state.pt").write_bytes(b"weights")
    Run.objects.filter(id=run.id).update(checkpoint_dir=str(tmp_path / "out"))
    write_points(run.id, [("ckpt/best_step", 40, 40.0), ("ckpt/best_accuracy", 40, 0.75)])
    model_id = f"m-{run.id:032x}"
    as_model = f"/{run.experiment_id}/models/{model_id}/artifacts"
    as_folder = f"/{run.experiment_id}/{run.id}/artifacts"

    def listing(user, path):
        return client.get(ARTIFACTS, {"path": path}, headers=bearer(user)).json()["files"]

    assert listing(bob, as_model) == [{"path": "state.pt", "is_dir": False, "file_size": 7}]
    assert listing(bob, as_folder) == [{"path": "troupe-best", "is_dir": True}]
    assert listing(bob, as_folder + "/troupe-best") == listing(bob, as_model)
    for path in (as_model, as_folder + "/troupe-best"):
        got = client.get(ARTIFACTS + path + "/state.pt", headers=bearer(bob))
        assert got.status_code == 200 and b"".join(got.streaming_content) == b"weights"
        for method in ("put", "delete"):  # read-only, even to the run's owner
            refused = getattr(client, method)(
                ARTIFACTS + path + "/state.pt", b"x", headers=bearer(alice)
            )
            assert refused.status_code == 400, refused.content  # INVALID_STATE for the run
    assert (best / "state.pt").read_bytes() == b"weights"
