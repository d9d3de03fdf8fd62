"""What the benchmarks share, so each bench script holds only what it measures.

- A throwaway PostgreSQL database: `recreate_database`/`drop_database` on a server, and
  `django_database`, which also points Django at it, migrates it and drops it afterwards
  (the in-process benches of the web app: `episode_view.py`, `stats_page.py`,
  `matrix_view.py`; `troupe_server.py` runs a real server on one).
- Timing: `timed` (seconds of each of `repeats` calls), and for the trainer's benches
  `timed_steps_config` + `train_steps`: a cpu-demo run whose training steps are what is timed
  (`grad_drill.py`, `episodes.py` read `sys/step_seconds` from the reporter).
- The lines every summary carries: `machine()` and `load_average()`.
- The comparisons with MLflow's server (`tracking_vs_mlflow.py`, `mlflow_endpoint.py`,
  `mlflow_artifacts.py`): which MLflow venv to use (`chosen_mlflow_python`,
  `mlflow_available`, `mlflow_wanted`), a smoke run's database names (`smoke_suffix`), the
  sides' order (`abba`), and the summary's scaffolding: `comparison_head`, `median_of` and
  `each_of` over the repeats' rows, `ratio` of Troupe to MLflow, `print_summary`.
- A one-row result (`decode_step.py`, `trl_step.py`, `rollout.py`): `print_row`.

Django, psycopg and the trainer are imported inside the helpers that need them: a bench of
the web app never loads torch, and a bench of the trainer never sets Django up nor needs the
web stack installed (the GPU machine has none). Not a benchmark.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_MLFLOW_PYTHON = "/tmp/mlflow-venv/bin/python"  # made as tracking_vs_mlflow.py says


def log(line: str) -> None:
    """Progress for the person watching, on stderr: stdout carries the result (`--json`)."""
    print(line, file=sys.stderr, flush=True)


def database_url(server_url: str, name: str) -> str:
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def recreate_database(server_url: str, name: str) -> str:
    """Drop (if present) and create database `name` on the server; returns its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    import psycopg

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


# --- the comparisons with MLflow's server ------------------------------------------------------


def chosen_mlflow_python(args) -> str | None:
    """The python of the MLflow venv to compare with: none with `--without-mlflow`, else
    `--mlflow-python` (its default $MLFLOW_PYTHON), else DEFAULT_MLFLOW_PYTHON where it exists."""
    if args.without_mlflow:
        return ""
    if args.mlflow_python is None and Path(DEFAULT_MLFLOW_PYTHON).exists():
        return DEFAULT_MLFLOW_PYTHON
    return args.mlflow_python


def mlflow_available(python: str | None) -> bool:
    if not python or not Path(python).exists():
        return False
    check = subprocess.run([python, "-c", "import mlflow, psycopg2"], capture_output=True)
    return check.returncode == 0


def mlflow_wanted(args) -> bool:
    """Whether MLflow's side runs. Without its venv a smoke run goes on with Troupe's side
    alone; any other run stops here (exit 2): one side is no comparison."""
    with_mlflow = mlflow_available(args.mlflow_python)
    if not with_mlflow and not args.smoke:
        log(f"MLflow is not available (--mlflow-python {args.mlflow_python!r})")
        sys.exit(2)
    return with_mlflow


def smoke_suffix(smoke: bool) -> str:
    """What a run's database names end with: a smoke run's carry its process id, so smoke runs
    side by side (CI, the tests) never drop each other's databases."""
    return f"_smoke_{os.getpid()}" if smoke else ""


def abba(sides: Sequence, repeat: int) -> Sequence:
    """The sides in repeat `repeat`'s order, reversed every other repeat (A B, B A, ...), so
    neither always goes first (onto a cold cache, or a quiet machine)."""
    return sides if repeat % 2 == 0 else sides[::-1]


def one_minute_load() -> float:
    return round(os.getloadavg()[0], 2)


def comparison_head(args, workload: Sequence[str], load_before: float) -> dict:
    """What a comparison's summary opens with: the machine, the one-minute load average before
    the servers started and now, and the settings in `workload` (names of `args`)."""
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_before": load_before,
        "load_after": one_minute_load(),
        "workload": {name: getattr(args, name) for name in workload},
    }


def median_of(rows: Sequence[dict], key: str, digits: int | None = None) -> float:
    """The median of `key` over the repeats' rows, to `digits` places (None: a whole number)."""
    return round(statistics.median(row[key] for row in rows), digits)


def each_of(rows: Sequence[dict], key: str, digits: int | None = None) -> list[float]:
    """Every repeat's `key`, in the order measured, to `digits` places (None: whole numbers)."""
    return [round(row[key], digits) for row in rows]


def ratio(troupe: dict, mlflow: dict, key: str, *, higher_is_better: bool = True) -> float:
    """How many times Troupe is ahead of MLflow on the summary's figure `key`, two places: its
    rate over MLflow's (points/s, MiB/s), or for seconds (`higher_is_better=False`) MLflow's
    over Troupe's; above 1, Troupe is ahead either way."""
    if higher_is_better:
        return round(troupe[key] / mlflow[key], 2)
    return round(mlflow[key] / troupe[key], 2)


def print_summary(summary: dict) -> None:
    """The result as indented JSON on stdout; its one-line `summary`, where it has one, on
    stderr as well, for the person watching."""
    print(json.dumps(summary, indent=2))
    if "summary" in summary:
        log(summary["summary"])


def print_row(row: dict, as_json: bool) -> None:
    """A one-row result on stdout: a JSON line (`--json`), else a `key: value` line each."""
    if as_json:
        print(json.dumps(row))
        return
    width = max(map(len, row))
    for key, value in row.items():
        print(f"{key:>{width}}: {value}")
