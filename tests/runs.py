"""Helpers for tests in which a real worker trains real runs.

- `tiny_model` (session fixture): the warm-started `tiny-s` under this session's data
  directory, built once (8–15 minutes on two cores) in a subprocess, so the test
  process never imports torch; workers started by the tests share it.
- `SMALL`: config values that make a `cpu-demo` run take seconds; `ONE_STEP`, a run of one
  step that a test trains in its own process (`workers.execute.train_run`).
- `wait_for(condition)`: poll the database until a condition holds, riding out a database
  that is restarting.
- `database_outage(seconds)`: what a PostgreSQL restart does to this session's test database
  (its connections cut, new ones refused for a while), and to no other session's.
- `points_of(run)`: the stored (key, step) pairs of a run.
- `form_data(**overrides)`: what a browser posts from the new-experiment form.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection

from tests.helpers import ROOT, database_url, service_env
from trainer.config import field_help
from vocabulary.names import MATRIX_AXES
from webapp.experiments.models import MetricPoint, Run
from webapp.runs.forms import as_text, preset_values

SMALL = {
    "steps": 4,
    "eval_every": 2,
    "prompts_per_step": 4,
    "group_size": 2,
    "eval_problems": 16,
    "max_new_tokens": 24,
}

ONE_STEP = {
    "steps": 1,
    "prompts_per_step": 1,
    "group_size": 2,
    "eval_problems": 2,
    "eval_every": 1,
    "checkpoint_every": 1,
    "max_new_tokens": 4,
}

# A worker that notices a dead colleague within seconds rather than minutes (yet not so fast
# that a live one, busy importing torch on a loaded machine, looks dead).
FAST_SWEEP = {
    "TROUPE_HEARTBEAT_SECONDS": "1",
    "TROUPE_STALE_RUN_SECONDS": "10",
    "TROUPE_SWEEP_SECONDS": "1",
}


def form_data(**overrides):
    """What the browser posts for the cpu-demo preset, with a 2 × 2 matrix."""
    data = {
        "name": "Voting vs single",
        "preset": "cpu-demo",
        "workflow": ["single", "voting"],
        "task": ["math"],
        "model": ["tiny-s"],
        "sharing": ["shared"],
        "seeds": "0, 1",
    }
    for row in field_help():
        if row["name"] in MATRIX_AXES:
            continue
        value = preset_values("cpu-demo")[row["name"]]
        if row["type"] == "bool":
            if value:
                data[row["name"]] = "on"
        else:
            data[row["name"]] = as_text(value)
    data.update(overrides)
    return data


@pytest.fixture(scope="session")
def tiny_model() -> None:
    build = (
        "from trainer.tiny_weights import tiny_model_path; tiny_model_path('tiny-s', quiet=True)"
    )
    result = subprocess.run(
        [sys.executable, "-c", build],
        cwd=ROOT,
        env=service_env(TROUPE_DATA_DIR=str(settings.DATA_DIR)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def require_postgres() -> None:
    """Skip a test that is about PostgreSQL itself when the run's test database is SQLite.

    The database was chosen on purpose (DATABASE_URL=sqlite:///…, CI's second leg); a
    PostgreSQL that does not answer is caught earlier, by tests/default_services.py.
    """
    if connection.vendor != "postgresql":
        pytest.skip(f"this test is about PostgreSQL; the test database is {connection.vendor}")


def database_outage(seconds: float) -> None:
    """Cut every connection to the test database and refuse new ones for `seconds`: what a
    restart of the server does to a worker, without restarting it. A restart would cut the
    connections of every test session on the server too (pytest-xdist's other process among
    them), which is not this test's to break. This process's own connection goes as well."""
    name = connection.settings_dict["NAME"]
    server = database_url(connection.settings_dict).rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                [name],
            )
            time.sleep(seconds)
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    connection.close()


def wait_for(
    condition: Callable[[], object], timeout: float = 240, what: str = "the condition"
) -> object:
    """Poll `condition` every half second until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except DatabaseError:
            connection.close()  # the server restarted under us: reconnect on the next query
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def run_in(run_id: int, *statuses: str) -> Run | None:
    run = Run.objects.get(id=run_id)
    return run if run.status in statuses else None


def points_of(run_id: int) -> Counter:
    """How many times each (key, step) is stored (the primary key makes it at most 1)."""
    return Counter(MetricPoint.objects.filter(run_id=run_id).values_list("key", "step"))


def steps_of(run_id: int, key: str) -> list[int]:
    return sorted(MetricPoint.objects.filter(run_id=run_id, key=key).values_list("step", flat=True))
