"""Benchmark: how Troupe's ingestion, compare read and matrix view grow from 10 to 1,000 runs.

One `gunicorn webapp.wsgi --workers 4` on a fresh PostgreSQL database (`troupe_scaling`), and
for each size N (default 10, 100, 1,000, in that order, so the metrics table grows as it
does in use: 20k, then 220k, then 2.2M points) one experiment of N external runs, written
only through the JSON API by `--clients` 4 concurrent clients (own HTTP session each):

- run creation: N × `POST /api/v1/runs` (with a matrix cell in `config`: 4 workflows × 2
  tasks × 10 models × 3 sharing modes, 5 seeds a cell), runs a second;
- ingestion: `--keys` 10 keys × `--steps` 200 steps a run (`eval/accuracy` with a rise and, in
  some runs, a terminal cliff; training and gradient series), batches of 1,000 points; the N
  runs are sent in 5 consecutive chunks, each timed: points a second, median over the chunks;
- compare read, one client, two ways: a request a run (`GET /api/v1/runs/<id>/metrics?keys=
  <4 keys>&max_points=500` for every run of the experiment, sequentially), and one request
  for them all (`GET /api/v1/metrics?experiment=<id>&keys=<4 keys>&max_points=500`);
- matrix view (after the runs are marked finished): the Dash matrix page's callback
  `webapp.dashboards.pages.matrix.update_matrix` (query → `cell_summaries` → figure and table),
  in this process on the same database, cold (summary cache cleared) and warm (cached).

Each read is repeated `--repeats` (≥5) times; the table shows medians, and the per-run cost
(time / N), whose flatness (or growth) is the curve.

    .venv/bin/python bench/scaling.py                      # sizes 10,100,1000
    .venv/bin/python bench/scaling.py --smoke              # sizes 2,4; seconds
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script
from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.troupe_server import TroupeServer, points_body  # noqa: E402
from vocabulary.names import (  # noqa: E402
    ACCURACY_KEY,
    ENTROPY_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    KL_KEY,
    LOSS_KEY,
    PER_AGENT,
    PER_ROLE,
    RESP_LEN_KEY,
    REWARD_KEY,
    SHARED,
    STEP_SECONDS_KEY,
    policy_key,
    role_key,
)

KEYS = [
    ACCURACY_KEY,
    REWARD_KEY,
    LOSS_KEY,
    role_key("solver", GRAD_NORM),
    role_key("solver", GRAD_SHARE),
    policy_key(SHARED, GRAD_NORM),
    ENTROPY_KEY,
    KL_KEY,
    RESP_LEN_KEY,
    STEP_SECONDS_KEY,
]
COMPARE_KEYS = KEYS[:4]
COMPARE_POINTS = 500
CHUNKS = 5
CELLS = list(
    itertools.product(
        ("single", "voting", "eval_opt", "orch_workers"),
        ("math", "code"),
        [f"model-{i}" for i in range(10)],
        (SHARED, PER_ROLE, PER_AGENT),
    )
)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_config(i: int) -> dict:
    workflow, task, model, sharing = CELLS[(i // 5) % len(CELLS)]
    return {"workflow": workflow, "task": task, "model": model, "sharing": sharing, "seed": i % 5}


def run_points(i: int, keys: list[str], steps: int) -> list[tuple[str, int, float]]:
    """Step-major points; eval/accuracy rises, and one run in three falls off a cliff."""
    rng = random.Random(i)
    peak = 0.3 + 0.5 * rng.random()
    cliff_at = int(steps * 0.7) if i % 3 == 0 else None
    out = []
    for step in range(steps):
        for j, key in enumerate(keys):
            if key == ACCURACY_KEY:
                value = 0.2 + (peak - 0.2) * (1 - math.exp(-step / (steps / 5)))
                if cliff_at is not None and step >= cliff_at:
                    value = 0.05
                value += 0.02 * rng.random()
            else:
                value = math.sin(step / 20 + j) + 0.1 * rng.random()
            out.append((key, step, value))
    return out


def parallel(clients: list, items: list, fn) -> float:
    """`fn(client, item)` for every item, items dealt round-robin to the clients' threads."""
    errors: list[BaseException] = []

    def loop(client, mine) -> None:
        try:
            for item in mine:
                fn(client, item)
        except BaseException as exc:  # noqa: BLE001 - re-raised after the join
            errors.append(exc)

    n = len(clients)
    threads = [threading.Thread(target=loop, args=(clients[c], items[c::n])) for c in range(n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def median_and_all(values: list[float], digits: int = 4) -> tuple[float, list[float]]:
    return round(statistics.median(values), digits), [round(v, digits) for v in values]


def measure_size(server: TroupeServer, n: int, args, owner) -> dict:
    from webapp.experiments.models import Experiment
    from webapp.runs.summaries import cell_summaries

    keys = KEYS[: args.keys]
    experiment = Experiment.objects.create(owner=owner, name=f"scaling-{n}")
    clients = [server.session() for _ in range(args.clients)]

    # Run creation through the API.
    ids: dict[int, int] = {}

    def create(client, i: int) -> None:
        ids[i] = client.create_run(experiment.id, f"run-{i}", run_config(i))

    create_s = parallel(clients, list(range(n)), create)
    per_run = len(keys) * args.steps
    rates = _ingest(clients, ids, n, keys, args)

    def finish(client, i: int) -> None:
        client._check(
            client.http.post(
                f"{client.url}/api/v1/runs/{ids[i]}/finish", json={"status": "succeeded"}
            )
        )

    parallel(clients, list(range(n)), finish)
    compare, compare_one = _compare_reads(clients[0], experiment.id, ids, keys, args)
    cold, warm, what = _matrix_times(owner, experiment.id, args.repeats)
    cells = len(cell_summaries(experiment, gradients=False))

    compare_s, compare_all = median_and_all(compare)
    compare_one_s, compare_one_all = median_and_all(compare_one)
    cold_s, cold_all = median_and_all(cold)
    warm_s, warm_all = median_and_all(warm)
    rate = statistics.median(rates)
    return {
        "runs": n,
        "points": n * per_run,
        "cells": cells,
        "create_runs_per_s": round(n / create_s, 1),
        "ingest_points_per_s": round(rate),
        "ingest_points_per_s_chunks": [round(r) for r in rates],
        "ingest_ms_per_run": round(1e3 * per_run / rate, 2),
        "compare_s": compare_s,
        "compare_ms_per_run": round(1e3 * compare_s / n, 2),
        "compare_s_all": compare_all,
        "compare_one_request_s": compare_one_s,
        "compare_one_request_ms_per_run": round(1e3 * compare_one_s / n, 3),
        "compare_one_request_s_all": compare_one_all,
        "matrix_cold_s": cold_s,
        "matrix_cold_ms_per_run": round(1e3 * cold_s / n, 2),
        "matrix_cold_s_all": cold_all,
        "matrix_warm_s": warm_s,
        "matrix_warm_ms_per_run": round(1e3 * warm_s / n, 3),
        "matrix_warm_s_all": warm_all,
        "matrix_view": what,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _ingest(clients, ids: dict[int, int], n: int, keys, args) -> list[float]:
    """Ingestion: the N runs in CHUNKS consecutive chunks, each timed; points a second."""
    per_run = len(keys) * args.steps
    rates = []
    for chunk in range(CHUNKS):
        members = range(chunk * n // CHUNKS, (chunk + 1) * n // CHUNKS)
        if not members:
            continue
        bodies = [
            (ids[i], points_body(points[k : k + args.batch]))
            for i in members
            for points in [run_points(i, keys, args.steps)]
            for k in range(0, len(points), args.batch)
        ]
        seconds = parallel(clients, bodies, lambda c, item: c.post_points(*item))
        rates.append(len(members) * per_run / seconds)
    return rates


def _compare_reads(
    reader, experiment_id: int, ids: dict[int, int], keys, args
) -> tuple[list[float], list[float]]:
    """Compare reads, one client: every run's 4 keys a request per run, then in one request;
    the seconds of each repeat. Raises when a read misses points."""
    n = len(ids)
    compare = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        got = sum(
            len(s["steps"])
            for i in range(n)
            for s in reader.series(ids[i], COMPARE_KEYS, COMPARE_POINTS).values()
        )
        compare.append(time.perf_counter() - started)
    expected = n * len([k for k in COMPARE_KEYS if k in keys]) * min(args.steps, COMPARE_POINTS)
    if got != expected:
        raise RuntimeError(f"compare read returned {got} points, not {expected}")
    compare_one = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        runs = reader.experiment_series(experiment_id, COMPARE_KEYS, COMPARE_POINTS)
        got = sum(len(s["steps"]) for series in runs.values() for s in series.values())
        compare_one.append(time.perf_counter() - started)
    if got != expected:
        raise RuntimeError(f"the one-request compare read returned {got} points, not {expected}")
    return compare, compare_one


def _matrix_times(owner, experiment_id: int, repeats: int) -> tuple[list, list, str]:
    """The matrix view, in this process (the Dash callback), cold and warm: the seconds of
    each repeat, and what was timed."""
    from django.db import connection

    from webapp.dashboards.data import viewing_as
    from webapp.runs.summaries import clear_cache

    view, what = matrix_view()
    cold, warm = [], []
    with viewing_as(owner):
        for _ in range(repeats):
            clear_cache()
            connection.close()  # a fresh connection each time, as a new request may have
            started = time.perf_counter()
            view(experiment_id)
            cold.append(time.perf_counter() - started)
            started = time.perf_counter()
            view(experiment_id)
            warm.append(time.perf_counter() - started)
    return cold, warm, what


def matrix_view():
    """(callable(experiment_id), what it is): the matrix page's Dash callback, or — should its
    module not import here — the two plain functions it calls."""
    try:
        from webapp.dashboards.pages.matrix import update_matrix

        return (
            lambda experiment_id: update_matrix(experiment_id, "gain", 0),
            "webapp.dashboards.pages.matrix.update_matrix",
        )
    except ImportError:
        from webapp.dashboards.figures import matrix_figure
        from webapp.experiments.models import Experiment
        from webapp.runs.summaries import cell_summaries

        def view(experiment_id: int):
            experiment = Experiment.objects.get(id=experiment_id)
            return matrix_figure(cell_summaries(experiment, gradients=False), "gain")

        return view, "cell_summaries + figures.matrix_figure"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="comma-separated run counts")
    parser.add_argument("--keys", type=int, default=10, help=f"keys a run (≤ {len(KEYS)})")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1000, help="points a request")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--smoke", action="store_true", help="sizes 2,4; 3 keys × 20 steps")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    database = "troupe_scaling"
    if args.smoke:
        args.sizes, args.keys, args.steps, args.batch = "2,4", 4, 20, 40
        args.clients, args.workers, args.repeats = 2, 2, 2
        database = f"troupe_scaling_smoke_{os.getpid()}"
    if not 1 <= args.keys <= len(KEYS):
        parser.error(f"--keys must be 1 to {len(KEYS)}")
    sizes = [int(s) for s in args.sizes.split(",")]

    rows = []
    with TroupeServer(args.postgres, database, args.workers, log=log) as server:
        # This process reads the same database for the matrix view.
        os.environ["DATABASE_URL"] = server.env["DATABASE_URL"]
        os.environ["TROUPE_DATA_DIR"] = server.env["TROUPE_DATA_DIR"]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.db import connection

        owner = get_user_model().objects.get(username="bench")
        try:
            for n in sizes:
                log(f"scaling: {n} runs")
                row = measure_size(server, n, args, owner)
                rows.append(row)
                log(
                    f"  {row['ingest_points_per_s']} points/s, compare {row['compare_s']} s "
                    f"(one request: {row['compare_one_request_s']} s), "
                    f"matrix cold {row['matrix_cold_s']} s / warm {row['matrix_warm_s']} s, "
                    f"load {row['load_average'][0]}"
                )
        finally:
            connection.close()  # before the database is dropped
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "workload": f"{args.keys} keys x {args.steps} steps a run, batches of {args.batch}, "
        f"{args.clients} clients, gunicorn {args.workers} workers, {args.repeats} repeats",
        "sizes": rows,
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
