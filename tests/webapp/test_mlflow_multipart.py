"""Multipart artifact uploads (`mpu/create`, a PUT per part, `mpu/complete` or `mpu/abort`):
the real MLflow client with MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD=true sends a large file in
parts to a live Troupe and reads it back identical, while the server's memory stays far below
the file's size; and request by request, a part is the run owner's to send, counted against
the limits, and an upload that is not completed leaves no artifact."""

import hashlib
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import mlflow
import pytest
from mlflow import MlflowClient

from tests.live_server import live_troupe, mlflow_env
from tests.people import bearer
from webapp.experiments.models import ApiToken, Run

MIB = 1024 * 1024
MPU = "/api/2.0/mlflow-artifacts/mpu/"
API = "/api/2.0/mlflow/"


def server_peak_mib(base: str) -> float:
    """The largest peak resident memory (VmHWM) of the live server's processes."""
    port = f"127.0.0.1:{urlsplit(base).port}".encode()
    peaks = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and port in (entry / "cmdline").read_bytes():
                status = (entry / "status").read_text()
                peaks.append(int(status.split("VmHWM:")[1].split()[0]) / 1024)
        except OSError:
            continue  # exited while we looked
    assert peaks, "the server's processes were not found"
    return max(peaks)


def random_file(path: Path, mib: int) -> str:
    """Write `mib` MiB of random bytes a MiB at a time; their SHA-256."""
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for _ in range(mib):
            block = os.urandom(MIB)
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(MIB):
            digest.update(block)
    return digest.hexdigest()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
def test_a_large_file_goes_up_in_parts_and_comes_down_identical(
    alice, tmp_path, monkeypatch, settings
):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    source = tmp_path / "weights.bin"
    expected = random_file(source, 96)
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path, threads=8) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "true")
        monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(MIB))
        monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_CHUNK_SIZE", str(8 * MIB))
        mlflow.set_tracking_uri(base)
        client = MlflowClient()
        run_id = client.create_run(client.create_experiment("big")).info.run_id
        client.log_text(run_id, "warm", "warm.txt")  # the server's code paths, loaded
        before = server_peak_mib(base)

        client.log_artifact(run_id, str(source), "ckpt")
        client.log_artifact(run_id, str(source))  # beside it: a second upload, same name

        listed = {f.path: f.file_size for f in client.list_artifacts(run_id, "ckpt")}
        assert listed == {"ckpt/weights.bin": 96 * MIB}
        got = Path(client.download_artifacts(run_id, "ckpt/weights.bin", str(tmp_path / "d")))
        assert sha256(got) == expected
        after = server_peak_mib(base)
        run = Run.objects.get(id=int(client.get_run(run_id).data.tags["troupe.run_id"]))

    log = (tmp_path / "gunicorn.log").read_text()
    assert log.count("PUT /api/2.0/mlflow-artifacts/mpu/part/") == 2 * 12  # 8 MiB parts
    assert log.count("POST /api/2.0/mlflow-artifacts/mpu/complete/") == 2
    folder = settings.DATA_DIR / "runs" / str(run.id)
    assert sha256(folder / "artifacts" / "weights.bin") == expected
    assert list((folder / "uploads").iterdir()) == []  # completed uploads leave no parts
    # 192 MiB went through the server and 96 MiB came back; it held a few parts' buffers.
    print(f"server peak resident memory: {before:.0f} MiB before, {after:.0f} MiB after")
    assert after - before < 48, (before, after)


# --- request by request --------------------------------------------------------------------------


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


def new_run(client, user) -> str:
    response = client.post(
        API + "runs/create",
        json.dumps({"experiment_id": "0"}),
        content_type="application/json",
        headers=bearer(user),
    )
    info = response.json()["run"]["info"]
    return info["artifact_uri"].removeprefix("mlflow-artifacts:/")


def post(client, user, action, folder, body):
    return client.post(
        MPU + f"{action}/{folder}",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(user),
    )


def put_part(client, credential, data):
    url = urlsplit(credential["url"])
    return client.put(
        f"{url.path}?{url.query}",
        data,
        content_type="application/octet-stream",
        headers=credential["headers"],
    )


def error(response, status, code) -> str:
    assert response.status_code == status, response.content
    assert response.json()["error_code"] == code
    return response.json()["message"]


def artifact_files(data_dir) -> list[str]:
    return sorted(p.name for p in data_dir.rglob("*") if p.is_file() and p.name != "meta.json")


@pytest.mark.django_db
def test_parts_join_in_order_and_the_etags_are_checked(client, alice, data_dir):
    folder = new_run(client, alice)
    created = post(client, alice, "create", folder, {"path": "/home/me/a.bin", "num_parts": 3})
    assert created.status_code == 200, created.content
    upload = created.json()
    parts = []
    for credential, data in zip(upload["credentials"], [b"one-", b"two-", b"three"]):
        answer = put_part(client, credential, data)
        assert answer.status_code == 200, answer.content
        parts.append({"part_number": credential["part_number"], "etag": answer["ETag"]})
    wrong = [parts[0], {**parts[1], "etag": parts[0]["etag"]}, parts[2]]
    body = {"path": "a.bin", "upload_id": upload["upload_id"]}
    error(
        post(client, alice, "complete", folder, {**body, "parts": wrong}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    done = post(client, alice, "complete", folder, {**body, "parts": parts})
    assert done.status_code == 200, done.content
    assert (data_dir / "runs").rglob("a.bin").__next__().read_bytes() == b"one-two-three"
    error(
        post(client, alice, "complete", folder, {**body, "parts": parts}),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )


@pytest.mark.django_db
def test_an_upload_missing_a_part_or_aborted_leaves_no_artifact(client, alice, data_dir):
    folder = new_run(client, alice)
    upload = post(client, alice, "create", folder, {"path": "a.bin", "num_parts": 2}).json()
    first = put_part(client, upload["credentials"][0], b"half")
    body = {"path": "a.bin", "upload_id": upload["upload_id"]}
    parts = [{"part_number": 1, "etag": first["ETag"]}, {"part_number": 2, "etag": ""}]
    message = error(
        post(client, alice, "complete", folder, {**body, "parts": parts}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert "Part 2" in message
    assert "a.bin" not in artifact_files(data_dir)
    assert post(client, alice, "abort", folder, body).status_code == 200
    assert artifact_files(data_dir) == []
    assert post(client, alice, "abort", folder, body).status_code == 200  # again: no error


@pytest.mark.django_db
def test_only_the_runs_owner_sends_parts(client, alice, bob, data_dir):
    folder = new_run(client, alice)
    error(
        post(client, bob, "create", folder, {"path": "a.bin", "num_parts": 1}),
        403,
        "PERMISSION_DENIED",
    )
    upload = post(client, alice, "create", folder, {"path": "a.bin", "num_parts": 1}).json()
    credential = {**upload["credentials"][0], "headers": bearer(bob)}
    error(put_part(client, credential, b"bob's"), 403, "PERMISSION_DENIED")
    assert artifact_files(data_dir) == []


@pytest.mark.django_db
def test_a_part_for_another_path_or_over_the_limit_is_refused(client, alice, data_dir, settings):
    settings.TROUPE_ARTIFACT_MAX_BYTES = 10
    folder = new_run(client, alice)
    upload = post(client, alice, "create", folder, {"path": "a.bin", "num_parts": 3}).json()
    first, second, third = upload["credentials"]
    elsewhere = {**first, "url": first["url"].replace("a.bin", "b.bin")}
    error(put_part(client, elsewhere, b"x"), 400, "INVALID_PARAMETER_VALUE")
    assert put_part(client, first, b"123456").status_code == 200
    message = error(put_part(client, second, b"12345"), 400, "INVALID_PARAMETER_VALUE")
    assert "TROUPE_ARTIFACT_MAX_BYTES" in message  # the parts together would pass it
    assert put_part(client, second, b"1234").status_code == 200
    error(
        put_part(
            client, {**third, "url": third["url"].replace("part_number=3", "part_number=4")}, b""
        ),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    assert not [p for p in data_dir.rglob(".upload-*")]
    error(
        post(client, alice, "create", folder + "/../x", {"path": "a", "num_parts": 1}),
        400,
        "INVALID_PARAMETER_VALUE",
    )
