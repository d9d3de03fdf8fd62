"""Transfers slower than the 30 s that gunicorn's sync workers allowed a request,
against Troupe served as `make run` and docker compose serve it (`webapp/gunicorn_conf.py`):
an upload whose client sends for 33 s and a download whose client reads for 33 s both finish
whole, and a metric the MLflow client logs meanwhile is stored while they are still going."""

import hashlib
import socket
import threading
import time
from urllib.parse import urlsplit

import mlflow
import pytest
from mlflow import MlflowClient

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, MetricPoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

SLOW_SECONDS = 33  # past the old limit of 30
CHUNK = 64 * 1024
BIG = 24 * 1024 * 1024  # larger than what the socket buffers hold, so the server keeps writing


def request_head(method: str, url, path: str, token: str, length: int | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {token}\r\n"
    if length is not None:
        head += f"Content-Type: application/octet-stream\r\nContent-Length: {length}\r\n"
    return (head + "Connection: close\r\n\r\n").encode()


def slow_upload(url, path: str, token: str, body: bytes, answers: list) -> None:
    """Send `body` in even pieces over SLOW_SECONDS, then read the answer's status line."""
    pieces = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        sock.sendall(request_head("PUT", url, path, token, len(body)))
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(SLOW_SECONDS / len(pieces))
        answers.append(sock.makefile("rb").readline())


def slow_download(url, path: str, token: str, answers: list) -> None:
    """Read slowly until SLOW_SECONDS have passed, then the rest at once: the digest of the
    body, after the status line."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.settimeout(60)
        sock.connect((url.hostname, url.port))
        sock.sendall(request_head("GET", url, path, token))
        started, received = time.monotonic(), b""
        while chunk := sock.recv(16 * 1024):
            received += chunk
            if time.monotonic() - started < SLOW_SECONDS:
                time.sleep(0.05)
    head, _, body = received.partition(b"\r\n\r\n")
    answers.append((head.split(b"\r\n")[0], hashlib.sha256(body).hexdigest()))


def test_transfers_slower_than_thirty_seconds_finish_while_metrics_pass_them(
    alice, tmp_path, monkeypatch, settings
):
    settings.DATA_DIR = tmp_path / "data"  # the server's too
    settings.DATA_DIR.mkdir()
    _, token = ApiToken.issue(alice, "mlflow")
    big = bytes(range(256)) * (BIG // 256)
    upload = bytes(reversed(range(256))) * (40 * CHUNK // 256)  # 2.5 MiB: 40 pieces
    with live_troupe(tmp_path, deployed=True) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        mlflow.set_experiment("slow transfers")  # not the id an earlier test left in the client
        (tmp_path / "big.bin").write_bytes(big)
        with mlflow.start_run() as run:
            mlflow.log_artifact(str(tmp_path / "big.bin"))
            root = "/api/2.0/mlflow-artifacts/artifacts" + run.info.artifact_uri.removeprefix(
                "mlflow-artifacts:"
            )
            url = urlsplit(base)
            uploaded, downloaded = [], []
            transfers = [
                threading.Thread(
                    target=slow_upload, args=(url, f"{root}/slow.bin", token, upload, uploaded)
                ),
                threading.Thread(
                    target=slow_download, args=(url, f"{root}/big.bin", token, downloaded)
                ),
            ]
            for transfer in transfers:
                transfer.start()
            time.sleep(2)  # both under way
            mlflow.log_metric("loss", 0.5, step=1)
            logged_while_transferring = all(t.is_alive() for t in transfers)
            for transfer in transfers:
                transfer.join(timeout=120)
        assert logged_while_transferring
        assert MetricPoint.objects.filter(key="loss").get().value == 0.5
        assert uploaded == [b"HTTP/1.1 200 OK\r\n"]
        assert downloaded == [(b"HTTP/1.1 200 OK", hashlib.sha256(big).hexdigest())]
        back = MlflowClient().download_artifacts(run.info.run_id, "slow.bin", str(tmp_path))
        assert open(back, "rb").read() == upload
