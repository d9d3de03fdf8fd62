"""A run's artifact bytes are a stored running total (walking the run's folder for
every upload made each upload slower as the folder grew): uploads and replacements keep it
exact, a deletion has it counted again once, the run's limit is checked against it, and the
file that holds it is neither counted nor listed."""

import json

import pytest

from tests.people import bearer
from webapp.experiments.models import TrackedRun
from webapp.tracking import artifacts

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


@pytest.fixture
def run_root(client, alice):
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=bearer(alice),
    )
    return response.json()["run"]["info"]["artifact_uri"].removeprefix("mlflow-artifacts:")


def put(client, user, path, data):
    return client.put(
        ARTIFACTS + path, data, content_type="application/octet-stream", headers=bearer(user)
    )


def total_file():
    return artifacts.run_folder(TrackedRun.objects.get().run_id).parent / ".artifact-bytes"


def stored_total() -> int | None:
    return int(total_file().read_text()) if total_file().exists() else None


def on_disk() -> int:
    return artifacts.used_bytes(artifacts.run_folder(TrackedRun.objects.get().run_id).parent)


def test_uploads_and_replacements_keep_the_total_exact(client, alice, run_root):
    for i in range(5):
        assert put(client, alice, f"{run_root}/f{i}.txt", b"x" * (10 + i)).status_code == 200
    assert stored_total() == on_disk() == 60
    assert put(client, alice, f"{run_root}/f0.txt", b"y" * 3).status_code == 200  # replaced
    assert stored_total() == on_disk() == 53
    listed = client.get(ARTIFACTS, {"path": run_root.strip("/")}, headers=bearer(alice))
    assert sorted(f["path"] for f in listed.json()["files"]) == [f"f{i}.txt" for i in range(5)]


def test_a_deletion_has_the_total_counted_again_by_the_next_upload(client, alice, run_root):
    put(client, alice, f"{run_root}/a.txt", b"x" * 40)
    put(client, alice, f"{run_root}/d/b.txt", b"x" * 30)
    deleted = client.delete(ARTIFACTS + f"{run_root}/d", headers=bearer(alice))
    assert deleted.status_code == 200 and stored_total() is None
    put(client, alice, f"{run_root}/c.txt", b"x" * 5)
    assert stored_total() == on_disk() == 45


def test_the_runs_limit_is_checked_against_the_stored_total(client, alice, run_root, settings):
    settings.TROUPE_RUN_ARTIFACTS_MAX_BYTES = 100
    assert put(client, alice, f"{run_root}/a.bin", b"x" * 60).status_code == 200
    refused = put(client, alice, f"{run_root}/b.bin", b"x" * 41)
    assert (
        refused.status_code == 400 and "TROUPE_RUN_ARTIFACTS_MAX_BYTES" in refused.json()["message"]
    )
    # The total is what the check reads, not a walk of the folder: 90 stored leaves room for
    # 10 more bytes although only 60 lie on disk.
    total_file().write_text("90")
    assert put(client, alice, f"{run_root}/c.bin", b"x" * 11).status_code == 400
    assert put(client, alice, f"{run_root}/c.bin", b"x" * 10).status_code == 200
    assert stored_total() == 100
