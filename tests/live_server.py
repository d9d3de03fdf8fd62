"""A live Troupe for tests that drive it from outside: `gunicorn webapp.wsgi` on a free port,
on the test database (the test must use `transactional_db`, so its rows are committed where
the server sees them), its static files collected first. Used by the MLflow client tests and
the MLflow browser tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from tests.helpers import ROOT, database_url, free_port, service_env


@contextmanager
def live_troupe(
    log_dir: Path,
    threads: int = 4,
    workers: int = 1,
    database: str | None = None,
    deployed: bool = False,
) -> Iterator[str]:
    """Start the server, wait until it answers, yield its base URL, stop it. `database` (a
    DATABASE_URL) replaces the test database; the access log lands in `log_dir/gunicorn.log`
    beside the server's own lines. `deployed`: served exactly as `make run` and docker
    compose serve it (`webapp/gunicorn_conf.py`), `threads` and `workers` unused."""
    # The server serves its scripts and styles from the collected static files, as
    # `scripts/run.py` deploys them; a fresh clone has none until they are collected.
    call_command("collectstatic", interactive=False, verbosity=0)
    port = free_port()
    env = service_env(
        DATABASE_URL=database or database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    log = log_dir / "gunicorn.log"
    with log.open("w") as out:
        how = (
            ["--config", "python:webapp.gunicorn_conf"]
            if deployed
            else ["--workers", str(workers), "--threads", str(threads), "--timeout", "60"]
        )
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "webapp.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                *how,
                "--access-logfile",
                "-",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield base
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    """gunicorn's quick shutdown, then SIGKILL: nothing the test server holds needs saving.
    Its graceful one (SIGTERM) waited 2.5 s for the MLflow client's idle keep-alive
    connection at every test's end, and a worker busy in a request (a cut upload, a write
    waiting on SQLite's lock) can outlast even the quick one's grace."""
    os.killpg(process.pid, signal.SIGQUIT)
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def mlflow_env(base: str, token: str) -> dict[str, str]:
    """What a researcher exports to point MLflow-logging code at Troupe (and, for tests, no
    retries: a refused request fails at once instead of after minutes of back-off)."""
    return {
        "MLFLOW_TRACKING_URI": base,
        "MLFLOW_TRACKING_TOKEN": token,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "60",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
    }


@contextmanager
def mlflow_at_troupe(
    user, log_dir: Path, monkeypatch, password: str | None = None
) -> Iterator[str]:
    """A live Troupe, and this process's MLflow client pointed at it with a new token of
    `user` (who signs in to its pages with `password`, when given): yields its base URL."""
    import mlflow  # the MLflow tests' own dependency, not every live server's

    from webapp.experiments.models import ApiToken

    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    _, token = ApiToken.issue(user, "mlflow")
    with live_troupe(log_dir) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        yield base
