"""What the benchmarks share, so each bench script holds only what it measures.

- A throwaway PostgreSQL database: `recreate_database`/`drop_database` on a server, and
  `django_database`, which also points Django at it, migrates it and drops it afterwards
  (the in-process benches of the web app: `episode_view.py`, `stats_page.py`,
  `matrix_view.py`; `troupe_server.py` runs a real server on one).
- Timing: `timed` (seconds of each of `repeats` calls), and for the trainer's benches
  `timed_steps_config` + `train_steps`: a cpu-demo run whose training steps are what is timed
  (`grad_drill.py`, `episodes.py` read `sys/step_seconds` from the reporter).
- The lines every summary carries: `machine()` and `load_average()`.

Django and the trainer are imported inside the helpers that need them: a bench of the web
app never loads torch, and a bench of the trainer never sets Django up. Not a benchmark.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import psycopg

DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"


def log(line: str) -> None:
    """Progress for the person watching, on stderr: stdout carries the result (`--json`)."""
    print(line, file=sys.stderr, flush=True)


def database_url(server_url: str, name: str) -> str:
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def recreate_database(server_url: str, name: str) -> str:
    """Drop (if present) and create database `name` on the server; returns its URL."""
    with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def django_database(server_url: str, name: str) -> Iterator[None]:
    """Django set up on a fresh, migrated database `name`, dropped when the block ends
    (however it ends: a failed bench leaves no database behind)."""
    os.environ["DATABASE_URL"] = recreate_database(server_url, name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    try:
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield
    finally:
        from django.db import connections

        connections.close_all()  # DROP DATABASE would wait for (or kill) our own sessions
        drop_database(server_url, name)


def timed(call: Callable[[], object], repeats: int, before=None) -> list[float]:
    """Seconds of each of `repeats` calls; `before` (untimed) runs ahead of each."""
    times = []
    for _ in range(repeats):
        if before:
            before()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed_steps_config(workflow: str, steps: int, smoke: bool, **values):
    """A cpu-demo config whose training steps are what is timed: a small step-0 evaluation
    and no evaluation or checkpoint after it. `smoke`: steps of 2 problems × 2 samples (CI)."""
    from trainer.config import make_config

    return make_config(
        "cpu-demo",
        workflow=workflow,
        steps=steps,
        eval_problems=16,  # the step-0 evaluation is not what is measured
        eval_every=1000,
        checkpoint_every=1000,
        **values,
        **({"prompts_per_step": 2, "group_size": 2} if smoke else {}),
    )


def train_steps(config):
    """Train `config` in a throwaway directory; returns the `ListReporter` that heard it
    (its metrics, `sys/step_seconds` among them, and its episodes)."""
    import trainer.train as train_module
    from trainer.reporting import ListReporter

    reporter = ListReporter()
    with tempfile.TemporaryDirectory() as out:
        train_module.train(config, out, reporter)
    return reporter
