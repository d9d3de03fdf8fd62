"""A Hub id downloads into the HF cache when allowed, against a fake Hub on 127.0.0.1.

No test touches the network: the "Hub" is a tiny HTTP server serving a saved Qwen3 model
directory with the few endpoints `huggingface_hub.snapshot_download` calls."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.trainer.test_models import qwen3_dir  # noqa: F401 - the fixture
from trainer.models import ModelUnavailable, load_model

REPO = "troupe-test/qwen3-tiny"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _oid(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


class FakeHub(BaseHTTPRequestHandler):
    root: Path
    requests: list[str]

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _file(self) -> Path | None:
        prefix = f"/{REPO}/resolve/"
        if not self.path.startswith(prefix):
            return None
        filename = self.path[len(prefix) :].split("/", 1)[1].split("?")[0]
        path = self.root / filename
        return path if path.is_file() else None

    def _send(self, body: bytes, *, head: bool, extra: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _answer(self, head: bool) -> None:
        self.requests.append(f"{self.command} {self.path}")
        files = sorted(p for p in self.root.iterdir() if p.is_file())
        route = self.path.split("?")[0]
        if route.startswith(f"/api/models/{REPO}/tree/"):  # the file listing
            tree = [
                {"type": "file", "path": p.name, "size": p.stat().st_size, "oid": _oid(p)}
                for p in files
            ]
            self._send(json.dumps(tree).encode(), head=head)
            return
        if route.startswith(f"/api/models/{REPO}"):  # the repo's current commit
            info = {"id": REPO, "sha": SHA, "siblings": [{"rfilename": p.name} for p in files]}
            self._send(json.dumps(info).encode(), head=head)
            return
        path = self._file()
        if path is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = path.read_bytes()
        etag = hashlib.sha256(body).hexdigest()
        headers = {"X-Repo-Commit": SHA, "ETag": f'"{etag}"'}
        self._send(body, head=head, extra=headers)

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)


@pytest.fixture
def fake_hub(qwen3_dir, tmp_path, monkeypatch):  # noqa: F811
    handler = type("Handler", (FakeHub,), {"root": Path(qwen3_dir), "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TROUPE_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    yield handler
    server.shutdown()
    server.server_close()


def test_a_hub_id_downloads_into_the_cache_and_loads(fake_hub, tmp_path):
    loaded = load_model(REPO, "cpu")
    assert loaded.family == "chat"
    assert type(loaded.model).__name__ == "Qwen3ForCausalLM"
    assert Path(loaded.path).is_relative_to(tmp_path / "hub")
    assert any(r.startswith("GET /api/models/") for r in fake_hub.requests)


def test_a_cached_model_loads_without_asking_the_hub_again(fake_hub):
    load_model(REPO, "cpu")
    fake_hub.requests.clear()
    load_model(REPO, "cpu")
    assert fake_hub.requests == []


@pytest.mark.parametrize(
    "variable, words",
    [
        ("TROUPE_OFFLINE", "TROUPE_OFFLINE=1 forbids downloads"),
        ("HF_HUB_OFFLINE", "HF_HUB_OFFLINE"),
    ],
)
def test_an_offline_node_refuses_to_download_and_says_why(fake_hub, monkeypatch, variable, words):
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ModelUnavailable, match=words) as caught:
        load_model(REPO, "cpu")
    assert REPO in str(caught.value) and "local directory" in str(caught.value)
    assert fake_hub.requests == []


def test_a_failed_download_names_the_endpoint(fake_hub, monkeypatch):
    with pytest.raises(ModelUnavailable, match="127.0.0.1") as caught:
        load_model("troupe-test/missing", "cpu")
    assert "troupe-test/missing" in str(caught.value)
