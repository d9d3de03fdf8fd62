"""Benchmark plumbing: a fresh PostgreSQL database, Troupe's real web server on it, a client.

`bench/tracking_vs_mlflow.py` and `bench/scaling.py` measure Troupe the way a user meets it:
`gunicorn webapp.wsgi` (N workers) on a free port, a freshly migrated database, a user with an
API token and one experiment to log external runs into, and HTTP requests with a bearer token
against the JSON API of docs/design.md §7. Not a benchmark itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from bench.common import drop_database, recreate_database

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

_SETUP = """
import json
from django.contrib.auth import get_user_model
from webapp.experiments.models import ApiToken, Experiment
user, _ = get_user_model().objects.get_or_create(username="bench")
_, token = ApiToken.issue(user, "bench")
experiment = Experiment.objects.create(owner=user, name="bench")
print(json.dumps({"token": token, "experiment": experiment.id}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    """Wait until `url` answers at all (any status), or fail if `proc` died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before answering")
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer at {url} within {timeout:.0f} s")


def stop(proc: subprocess.Popen | None, grace: float = 15.0) -> None:
    """SIGTERM the process group we started (the server and its workers), then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_mlflow(
    python: str, workdir: str, store: str, artifacts: list[str], workers: int
) -> tuple[subprocess.Popen, str]:
    """MLflow's own `mlflow server` (under `python`, its own venv) on a free port of
    127.0.0.1 with `store` as its backend and `artifacts` as its artifact options, once it
    answers /health: (the process, its URL). Its log is `workdir/server.log`, printed when it
    does not start."""
    from bench.common import log

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    command = [python, "-m", "mlflow", "server", "--backend-store-uri", store, *artifacts]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    command += ["--uvicorn-opts", "--no-access-log"]
    server_log = Path(workdir) / "server.log"
    proc = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(server_log, "w"),  # noqa: SIM115
        start_new_session=True,
    )
    try:
        wait_http(f"{url}/health", proc, "mlflow server", timeout=240)
    except RuntimeError:
        log(server_log.read_text()[-3000:])
        raise
    return proc, url


class TroupeServer:
    """`gunicorn webapp.wsgi` on a fresh database; `with TroupeServer(...) as server:`.

    Attributes once started: `url`, `token`, `experiment` (an id to create runs in), `env`
    (the environment the server runs with: DATABASE_URL and a private TROUPE_DATA_DIR).
    """

    def __init__(
        self, postgres: str, database: str, workers: int = 4, log=None, access_log: bool = False
    ):
        """`postgres` is a server URL whose `database` is created afresh, or `sqlite` for the
        embedded default (a new file in the private data directory). `access_log` keeps
        gunicorn's access log in `self.access_log_path` (the statuses answered)."""
        self.postgres = postgres
        self.access_log = access_log
        self.database = database
        self.workers = workers
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="troupe-bench-")
        self.url = ""
        self.token = ""
        self.experiment = 0
        self.env: dict[str, str] = {}

    @property
    def sqlite(self) -> bool:
        return self.postgres == "sqlite"

    @property
    def access_log_path(self) -> Path:
        return Path(self._tmp.name) / "access.log"

    def __enter__(self) -> TroupeServer:
        if self.sqlite:
            db_url = f"sqlite:///{Path(self._tmp.name) / (self.database + '.sqlite3')}"
        else:
            db_url = recreate_database(self.postgres, self.database)
        self.env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "TROUPE_DATA_DIR": self._tmp.name,
            "DEBUG": "false",
        }
        self.env.pop("CELERY_BROKER_URL", None)  # nothing is queued: the embedded broker
        manage = [PYTHON, str(ROOT / "manage.py")]
        self.log(f"troupe: migrating {self.database}")
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=self.env, check=True)
        out = subprocess.run(
            [*manage, "shell", "-c", _SETUP], env=self.env, check=True, capture_output=True
        ).stdout
        setup = json.loads(out.decode().strip().splitlines()[-1])
        self.token, self.experiment = setup["token"], setup["experiment"]
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log(f"troupe: gunicorn webapp.wsgi, {self.workers} workers, on {self.url}")
        self.proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "gunicorn",
                "webapp.wsgi",
                "--config",  # as `make run` and compose serve it; the workers as asked
                "python:webapp.gunicorn_conf",
                "--workers",
                str(self.workers),
                "--bind",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
                *(["--access-logfile", str(self.access_log_path)] if self.access_log else []),
            ],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )
        wait_http(f"{self.url}/api/v1/runs", self.proc, "gunicorn")
        return self

    def __exit__(self, *exc) -> None:
        stop(self.proc)
        try:
            if not self.sqlite:
                drop_database(self.postgres, self.database)
        finally:
            self._tmp.cleanup()

    def session(self) -> TroupeClient:
        return TroupeClient(self.url, self.token)


class TroupeClient:
    """The JSON API of docs/design.md §7 over one keep-alive HTTP session."""

    def __init__(self, url: str, token: str):
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {token}"

    def _check(self, response: requests.Response) -> dict:
        if response.status_code >= 400:
            raise RuntimeError(f"{response.request.method} {response.url}: {response.text[:300]}")
        return response.json()

    def create_run(self, experiment: int, name: str, config: dict | None = None) -> int:
        body = {"name": name, "experiment": experiment}
        if config:
            body["config"] = config
        return self._check(self.http.post(f"{self.url}/api/v1/runs", json=body))["id"]

    def post_points(self, run_id: int, body: bytes) -> int:
        """POST an already JSON-encoded `{"points": [...]}` body; returns `accepted`."""
        response = self.http.post(
            f"{self.url}/api/v1/runs/{run_id}/metrics",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        return self._check(response)["accepted"]

    def series(self, run_id: int, keys: list[str] | None, max_points: int) -> dict[str, dict]:
        params = {"max_points": max_points}
        if keys is not None:
            params["keys"] = ",".join(keys)
        response = self.http.get(f"{self.url}/api/v1/runs/{run_id}/metrics", params=params)
        return self._check(response)["series"]

    def experiment_series(
        self, experiment: int, keys: list[str], max_points: int
    ) -> dict[str, dict[str, dict]]:
        """Every run's series in one request: {run id: {key: series}}."""
        params = {"experiment": experiment, "keys": ",".join(keys), "max_points": max_points}
        response = self.http.get(f"{self.url}/api/v1/metrics", params=params)
        return self._check(response)["runs"]


def points_body(points: list[tuple[str, int, float]]) -> bytes:
    return json.dumps(
        {"points": [{"key": k, "step": s, "value": v} for k, s, v in points]}
    ).encode()
