"""Bad input for MLflow artifacts against a live Troupe (gunicorn, as deployed): an upload cut
short (fewer bytes than its Content-Length, the connection then closed) leaves nothing
behind, and the real `mlflow` client gets a clear error for an artifact over the size limit,
which also leaves nothing. (Another user's run: `test_mlflow_client_artifacts_models.py`.)"""

import socket
import time
from urllib.parse import urlsplit

import mlflow
import pytest
import requests
from mlflow import MlflowClient

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Run
from webapp.tracking import artifacts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

LIMIT = 10_000


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch, settings):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    monkeypatch.setenv("TROUPE_ARTIFACT_MAX_BYTES", str(LIMIT))  # the server's, not ours
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path, threads=4) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        try:
            yield base, token
        finally:
            while mlflow.active_run():
                mlflow.end_run()


def files_under(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_an_upload_cut_short_leaves_nothing_behind(troupe):
    base, token = troupe
    mlflow.set_experiment("cut")
    with mlflow.start_run() as active:
        mlflow.log_text("whole", "kept.txt")
    run = MlflowClient().get_run(active.info.run_id)
    folder = artifacts.run_folder(Run.objects.get(id=int(run.data.tags["troupe.run_id"])).id)
    root = run.info.artifact_uri.removeprefix("mlflow-artifacts:")
    url = urlsplit(base)
    request = (
        f"PUT /api/2.0/mlflow-artifacts/artifacts{root}/cut.bin HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/octet-stream\r\nContent-Length: 5000\r\n\r\n"
    ).encode() + b"x" * 1000
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)  # the client goes away 4,000 bytes early
        sock.settimeout(30)
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while files_under(folder) != ["kept.txt"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert files_under(folder) == ["kept.txt"]  # no cut.bin, no .upload- temporary
    assert [f.path for f in MlflowClient().list_artifacts(active.info.run_id)] == ["kept.txt"]


def test_an_artifact_over_the_limit_is_refused_clearly_and_leaves_nothing(troupe, tmp_path):
    mlflow.set_experiment("big")
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (LIMIT + 1))
    with mlflow.start_run() as active:
        mlflow.log_text("small", "small.txt")
        with pytest.raises(requests.HTTPError) as refused:
            mlflow.log_artifact(str(big))
    body = refused.value.response.json()
    assert body["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "TROUPE_ARTIFACT_MAX_BYTES" in body["message"]
    assert "nothing was stored" in body["message"]
    run = MlflowClient().get_run(active.info.run_id)
    folder = artifacts.run_folder(int(run.data.tags["troupe.run_id"]))
    assert files_under(folder) == ["small.txt"]
    assert [f.path for f in MlflowClient().list_artifacts(active.info.run_id)] == ["small.txt"]
