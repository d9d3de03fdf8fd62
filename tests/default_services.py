"""Which database and broker a test session uses when no variable names them.

A pytest plugin (loaded by `-p tests.default_services` in pyproject.toml's addopts), because
the choice has to be made before pytest-django reads webapp/settings.py, which happens before
any conftest.py is imported.

With DATABASE_URL unset the suite runs on the local PostgreSQL
(`postgres://postgres@127.0.0.1:5432/postgres`), and with CELERY_BROKER_URL unset on the
local Redis (`redis://127.0.0.1:6379/0`) — the services of production and CI — when they
answer, so that a bare `make test` tests what CI tests. When one does not answer, the session
falls back to the embedded default (SQLite, the filesystem broker), tests that need the
service skip with a reason, and the header of the session's output says so in one line; with
TROUPE_REQUIRE_SERVICES=1 the session stops at once instead, naming the service.
To run on the embedded default on purpose, set DATABASE_URL=sqlite:///path/to/test.sqlite3.

Under pytest-xdist (`-n 2`, as `make test` runs) each worker is a session of its own: its own
test database and broker keys (named after its process) and its own data directory, a folder
named after the worker inside TROUPE_DATA_DIR. Run N's files live in `<data>/runs/N/`, and
both workers' databases number their runs from 1. The built models are shared: each worker's
`models` is a link to the parent's, where a lock keeps two builders of one model apart.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"
CHROMIUM = "/usr/bin/chromium"
PROBE_SECONDS = 3

_header: list[str] = []  # what the session's header says about its services


def _postgres_answers(url: str) -> str | None:
    """None when PostgreSQL at `url` accepts a connection, else why not (one line)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=PROBE_SECONDS).close()
    except Exception as exc:  # any failure to connect means "not available"
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def _redis_answers(url: str) -> str | None:
    import redis

    try:
        redis.Redis.from_url(url, socket_timeout=PROBE_SECONDS).ping()
    except Exception as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def _required() -> bool:
    return os.environ.get("TROUPE_REQUIRE_SERVICES", "").strip().lower() in {"1", "true", "yes"}


def _choose(variable: str, url: str, service: str, probe, fallback: str) -> None:
    if os.environ.get(variable, "").strip():
        _header.append(f"{service}: {variable} as set")
        return
    problem = probe(url)
    if problem is None:
        os.environ[variable] = url
        _header.append(f"{service}: {url} (the local default; {variable} is unset)")
    elif _required():
        raise pytest.UsageError(
            f"{service} at {url} does not answer ({problem}) and TROUPE_REQUIRE_SERVICES is "
            f"set: start it, or set {variable}"
        )
    else:
        _header.append(
            f"{service}: not at {url} ({problem}); using {fallback}, and tests that need "
            f"{service} skip. Start it, or set {variable}."
        )


def _own_data_dir(worker: str) -> None:
    """An xdist worker's own TROUPE_DATA_DIR, its models shared with the other workers'."""
    # The settings' own reading of the variable: `~` expanded, a relative path resolved.
    parent = (
        Path(os.environ.get("TROUPE_DATA_DIR") or Path(__file__).resolve().parent.parent / ".data")
        .expanduser()
        .resolve()
    )
    own = parent / worker
    (parent / "models").mkdir(parents=True, exist_ok=True)
    own.mkdir(exist_ok=True)
    if not (own / "models").is_symlink():
        (own / "models").symlink_to(parent / "models", target_is_directory=True)
    os.environ["TROUPE_DATA_DIR"] = str(own)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    """Before pytest-django loads the settings: point the unset variables at the local
    services that answer. (Also runs for --help; probing costs milliseconds when the services
    are up and PROBE_SECONDS each when a host does not answer at all.)"""
    _header.clear()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        _own_data_dir(worker)
    _choose("DATABASE_URL", LOCAL_POSTGRES, "PostgreSQL", _postgres_answers, "SQLite")
    _choose("CELERY_BROKER_URL", LOCAL_REDIS, "Redis", _redis_answers, "the filesystem broker")
    if not os.access(CHROMIUM, os.X_OK):
        _header.append(
            f"Chromium: missing at {CHROMIUM}, so the browser tests skip; install it with "
            "`apt-get install chromium` (`make test` does, when run as root)"
        )


def pytest_report_header(config) -> list[str]:
    return [f"services: {line}" for line in _header]
