"""MLflow's artifact endpoints request by request: files stay inside their run (traversal and
planted symlinks refused), uploads over a limit are refused whole with a message naming the
setting, only the owner writes, deleting a run deletes its artifacts, and the run page lists
them with downloads that are never rendered."""

import json
import os

import pytest

from tests.people import bearer
from webapp.experiments.models import Run
from webapp.runs.run_files import delete_runs
from webapp.tracking import artifacts

pytestmark = pytest.mark.django_db

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


def new_run(client, user) -> dict:
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=bearer(user),
    )
    assert response.status_code == 200, response.content
    return response.json()["run"]["info"]


def root(info) -> str:
    return info["artifact_uri"].removeprefix("mlflow-artifacts:")


def put(client, user, path, data=b"x"):
    return client.put(
        ARTIFACTS + path, data, content_type="application/octet-stream", headers=bearer(user)
    )


def error(response, status, code) -> str:
    assert response.status_code == status, response.content
    assert response.json()["error_code"] == code
    return response.json()["message"]


def test_a_runs_artifact_uri_names_its_experiment_and_run(client, alice):
    info = new_run(client, alice)
    run = Run.objects.get()
    assert (
        info["artifact_uri"] == f"mlflow-artifacts:/{run.experiment_id}/{info['run_id']}/artifacts"
    )
    experiment = client.get(API + "experiments/get", {"experiment_id": "0"}, headers=bearer(alice))
    assert experiment.json()["experiment"]["artifact_location"] == (
        f"mlflow-artifacts:/{run.experiment_id}"
    )


@pytest.mark.parametrize(
    "tail", ["/../x", "/a/../../x", "/./x", "//x", "/a\\..\\x", "/%2e%2e/x", "/%2e%2e%2f%2e%2e/x"]
)
def test_paths_that_leave_the_run_are_refused(client, alice, tail, data_dir):
    info = new_run(client, alice)
    message = error(put(client, alice, root(info) + tail), 400, "INVALID_PARAMETER_VALUE")
    assert "path" in message
    assert not [p for p in data_dir.rglob("*") if p.is_file()]


def test_a_path_outside_any_run_or_of_another_experiment_is_refused(client, alice):
    info = new_run(client, alice)
    run = Run.objects.get()
    error(put(client, alice, f"/{run.experiment_id}/x.txt"), 400, "INVALID_PARAMETER_VALUE")
    other = f"/{run.experiment_id + 1}/{info['run_id']}/artifacts/x.txt"
    error(put(client, alice, other), 404, "RESOURCE_DOES_NOT_EXIST")


def test_a_symlink_planted_in_the_run_folder_is_not_followed(client, alice, tmp_path):
    info = new_run(client, alice)
    folder = artifacts.run_folder(Run.objects.get().id)
    folder.mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("s3cret")
    os.symlink(tmp_path / "secret", folder / "link")
    error(put(client, alice, root(info) + "/link/new"), 400, "INVALID_PARAMETER_VALUE")
    got = client.get(ARTIFACTS + root(info) + "/link/key", headers=bearer(alice))
    assert got.status_code == 400 and b"s3cret" not in got.content
    listed = client.get(ARTIFACTS, {"path": root(info)[1:]}, headers=bearer(alice)).json()
    assert listed == {"files": []}


def test_uploads_over_the_limits_are_refused_and_leave_nothing(client, alice, settings):
    settings.TROUPE_ARTIFACT_MAX_BYTES = 1000
    settings.TROUPE_RUN_ARTIFACTS_MAX_BYTES = 1500
    info = new_run(client, alice)
    message = error(
        put(client, alice, root(info) + "/big", b"x" * 1001), 400, "INVALID_PARAMETER_VALUE"
    )
    assert "TROUPE_ARTIFACT_MAX_BYTES" in message and "nothing was stored" in message
    assert put(client, alice, root(info) + "/a", b"x" * 900).status_code == 200
    message = error(
        put(client, alice, root(info) + "/b", b"x" * 900), 400, "INVALID_PARAMETER_VALUE"
    )
    assert "TROUPE_RUN_ARTIFACTS_MAX_BYTES" in message
    assert put(client, alice, root(info) + "/a", b"y" * 1000).status_code == 200  # replaced
    folder = artifacts.run_folder(Run.objects.get().id)
    assert sorted(p.name for p in folder.iterdir()) == ["a"]


def test_only_the_owner_uploads_or_deletes_and_anyone_with_a_token_reads(client, alice, bob):
    info = new_run(client, alice)
    assert put(client, alice, root(info) + "/d/f.txt", b"data").status_code == 200
    error(put(client, bob, root(info) + "/d/g.txt"), 403, "PERMISSION_DENIED")
    error(
        client.delete(ARTIFACTS + root(info) + "/d", headers=bearer(bob)), 403, "PERMISSION_DENIED"
    )
    got = client.get(ARTIFACTS + root(info) + "/d/f.txt", headers=bearer(bob))
    assert got.status_code == 200 and b"".join(got.streaming_content) == b"data"
    assert got["Content-Disposition"].startswith("attachment")
    error(client.get(ARTIFACTS + root(info) + "/d/f.txt"), 401, "UNAUTHENTICATED")

    assert client.delete(ARTIFACTS + root(info) + "/d", headers=bearer(alice)).status_code == 200
    listed = client.get(ARTIFACTS, {"path": root(info)[1:]}, headers=bearer(alice)).json()
    assert listed == {"files": []}
    error(
        client.get(ARTIFACTS + root(info) + "/d/f.txt", headers=bearer(alice)),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )


def test_deleting_a_run_deletes_its_artifacts(client, alice, django_capture_on_commit_callbacks):
    info = new_run(client, alice)
    assert put(client, alice, root(info) + "/model/weights.bin", b"w" * 10).status_code == 200
    run = Run.objects.get()
    folder = artifacts.run_folder(run.id)
    assert (folder / "model" / "weights.bin").read_bytes() == b"w" * 10
    with django_capture_on_commit_callbacks(execute=True):
        delete_runs(Run.objects.filter(id=run.id))
    assert not folder.exists()


def test_the_run_page_lists_artifacts_with_downloads_that_never_render(client, alice, bob):
    info = new_run(client, alice)
    put(client, alice, root(info) + "/report.html", b"<script>alert(1)</script>")
    put(client, alice, root(info) + "/sub/notes.txt", b"notes")
    run = Run.objects.get()
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "Artifacts" in page
    assert f'href="/runs/{run.id}/artifacts/sub/notes.txt"' in page

    got = client.get(f"/runs/{run.id}/artifacts/report.html")
    assert got.status_code == 200
    assert got["Content-Type"] == "application/octet-stream"
    assert got["Content-Disposition"].startswith("attachment")
    assert got["X-Content-Type-Options"] == "nosniff"
    assert client.get(f"/runs/{run.id}/artifacts/../../secret_key").status_code == 404
    assert client.get(f"/runs/{run.id}/artifacts/sub").status_code == 404
    client.logout()
    assert client.get(f"/runs/{run.id}/artifacts/sub/notes.txt").status_code == 302  # sign in


def test_a_new_run_never_shows_files_left_in_its_folder_by_an_older_database(
    client, alice, experiment
):
    probe = Run.objects.create(experiment=experiment)  # the number the next run will follow
    stale = artifacts.run_folder(probe.id + 1)
    stale.mkdir(parents=True)
    (stale / "old.txt").write_text("another database's run")
    info = new_run(client, alice)
    assert artifacts.run_folder(Run.objects.get(external=True).id) == stale
    listed = client.get(ARTIFACTS, {"path": root(info)[1:]}, headers=bearer(alice)).json()
    assert listed == {"files": []}


class Cut:
    """A request body that ends (or whose connection breaks) before its Content-Length."""

    def __init__(self, data: bytes, fail: bool = False):
        self.data, self.fail = data, fail

    def read(self, size=-1):
        chunk, self.data = self.data, b""
        if not chunk and self.fail:
            raise OSError("connection reset")
        return chunk


@pytest.mark.parametrize("fail", [False, True])
def test_an_upload_shorter_than_announced_leaves_nothing(client, alice, fail):
    new_run(client, alice)
    run = Run.objects.get()
    folder = artifacts.run_folder(run.id)
    with pytest.raises((artifacts.MlflowError, OSError)) as stopped:
        artifacts.save(folder, "d/cut.bin", Cut(b"x" * 10, fail), 100, used=0)
    if not fail:
        assert "ended after 10 of the 100 bytes" in str(stopped.value.message)
    assert not [p for p in folder.rglob("*") if p.is_file()]


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")


def test_the_run_page_previews_text_images_and_tables_and_never_renders_html(client, alice):
    info = new_run(client, alice)
    put(client, alice, root(info) + "/notes.txt", b"<b>bold</b>\n" + b"y" * 10_000)
    put(client, alice, root(info) + "/plot.png", PNG)
    put(client, alice, root(info) + "/page.html", b"<script>alert(1)</script>")
    put(client, alice, root(info) + "/pic.svg", b"<svg onload='alert(1)'/>")
    rows = [[i, f"<i>{i}</i>"] for i in range(30)]
    table = {"columns": ["step", "answer"], "data": rows}
    put(client, alice, root(info) + "/eval.json", json.dumps(table).encode())
    run = Run.objects.get()
    client.force_login(alice)

    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert "y" * 4000 in page and "y" * 5000 not in page  # the first few KB only
    assert f'src="/runs/{run.id}/artifact-images/plot.png"' in page
    assert "artifact-images/pic.svg" not in page and "artifact-images/page.html" not in page
    assert "<script>alert(1)</script>" not in page
    assert "<th>answer</th>" in page and "<td>&lt;i&gt;19&lt;/i&gt;</td>" in page
    assert "&lt;i&gt;20&lt;/i&gt;" not in page and "10 more rows" in page

    image = client.get(f"/runs/{run.id}/artifact-images/plot.png")
    assert image.status_code == 200 and b"".join(image.streaming_content) == PNG
    assert image["Content-Type"] == "image/png"
    assert image["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in image["Content-Security-Policy"]
    for refused in ("page.html", "pic.svg", "notes.txt", "../../secret_key", "missing.png"):
        assert client.get(f"/runs/{run.id}/artifact-images/{refused}").status_code == 404
    client.logout()
    assert client.get(f"/runs/{run.id}/artifact-images/plot.png").status_code == 302
