"""Benchmark: concurrent MLflow writers on the embedded default (SQLite) and on PostgreSQL.

How many writers is the embedded default meant for? Each configuration starts a Troupe server
as `make run` does (`gunicorn webapp.wsgi`, 2 processes) on a fresh database, then `N` writer
processes at once; each is the real `mlflow.MlflowClient` with its own retries on (as a
researcher has them), creates its own run and logs `--steps` steps of `--keys` metrics, one
log-batch a step — the shape of a training loop's logging. Reported per configuration: wall
seconds from the first writer's first batch to the last writer's last, points/s stored, the
slowest writer's p95 request latency, and how many requests the server answered 503 (SQLite
stayed locked past its busy timeout: retried by the client) or 500 (must be none). Every
point is read back and counted.

    .venv/bin/python bench/embedded_writers.py                      # SQLite and PostgreSQL
    .venv/bin/python bench/embedded_writers.py --smoke              # tiny, for the test

`python bench/embedded_writers.py write URL TOKEN EXPERIMENT INDEX STEPS KEYS` is one writer
(tests/webapp/test_embedded_database.py starts it too); it prints its request latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.troupe_server import TroupeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def metric_key(k: int) -> str:
    return f"train/k{k}"


def write(url: str, token: str, experiment: str, index: int, steps: int, keys: int) -> None:
    """One writer process: a run of its own, one log-batch a step; prints its latencies."""
    os.environ.update(
        MLFLOW_TRACKING_URI=url, MLFLOW_TRACKING_TOKEN=token, MLFLOW_DISABLE_TELEMETRY="true"
    )
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient()
    run = client.create_run(experiment, run_name=f"writer {index}").info.run_id
    client.log_param(run, "writer", index)
    latencies = []
    started = time.time()
    for step in range(steps):
        now = int(time.time() * 1000)
        batch = [Metric(metric_key(k), index + k + step / 1000, now, step) for k in range(keys)]
        t0 = time.perf_counter()
        client.log_batch(run, metrics=batch)
        latencies.append(time.perf_counter() - t0)
    ended = time.time()
    client.set_terminated(run)
    print(json.dumps({"run": run, "latencies": latencies, "started": started, "ended": ended}))


def writer_command(url: str, token: str, experiment, index: int, steps: int, keys: int):
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "write",
        url,
        token,
        str(experiment),
        str(index),
        str(steps),
        str(keys),
    ]


def statuses(access_log: str) -> list[str]:
    """The HTTP statuses of gunicorn's access log (its default format: `"GET /…" 200 …`)."""
    return re.findall(r'" (\d{3}) ', access_log)


def measure(database: str, writers: int, steps: int, keys: int) -> dict:
    name = f"troupe_bench_writers_{os.getpid()}"
    with TroupeServer(database, name, workers=2, log=lambda _: None, access_log=True) as server:
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
        env.pop("MLFLOW_HTTP_REQUEST_MAX_RETRIES", None)  # the client's retries, as shipped
        procs = [
            subprocess.Popen(
                writer_command(server.url, server.token, server.experiment, i, steps, keys),
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(writers)
        ]
        outputs = [proc.communicate(timeout=1800) for proc in procs]
        for proc, (_, err) in zip(procs, outputs, strict=True):
            if proc.returncode != 0:
                raise SystemExit(f"a writer failed:\n{err[-3000:]}")
        reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
        latencies = [report["latencies"] for report in reports]
        # From the first writer's first batch to the last one's last: the writers' start-up
        # (importing mlflow, seconds here) is not the database's time.
        seconds = max(r["ended"] for r in reports) - min(r["started"] for r in reports)
        client = server.session()
        runs = client.http.get(
            f"{server.url}/api/v1/runs", params={"experiment": server.experiment}, timeout=60
        ).json()["runs"]
        stored = sum(
            len(series["steps"])
            for run in runs
            for series in client.series(run["id"], [metric_key(k) for k in range(keys)], 0).values()
        )
        answered = statuses(server.access_log_path.read_text())
    expected = writers * steps * keys
    if stored != expected:
        raise SystemExit(f"{database}, {writers} writers: {stored} points stored of {expected}")
    return {
        "database": "SQLite" if database == "sqlite" else "PostgreSQL",
        "writers": writers,
        "seconds": seconds,
        "points_per_s": expected / seconds,
        "p95_ms": 1000 * max(statistics.quantiles(each, n=20)[-1] for each in latencies),
        "answered_503": answered.count("503"),
        "answered_500": answered.count("500"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--writers", default="1,4,8,16")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--keys", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--smoke", action="store_true", help="2 writers × 10 steps, once")
    args = parser.parse_args()
    if args.smoke:
        args.writers, args.steps, args.keys, args.repeats = "2", 10, 4, 1
    results = []
    for writers in [int(n) for n in args.writers.split(",")]:
        for database in args.databases.split(","):
            url = "sqlite" if database == "sqlite" else args.postgres
            runs = [measure(url, writers, args.steps, args.keys) for _ in range(args.repeats)]
            median = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            median["answered_503"] = sum(r["answered_503"] for r in runs)
            median["answered_500"] = sum(r["answered_500"] for r in runs)
            results.append(median)
            print(
                f"{median['database']:>10} {writers:>3} writers: {median['points_per_s']:8.0f} "
                f"points/s, p95 {median['p95_ms']:6.1f} ms, 503s {median['answered_503']}, "
                f"500s {median['answered_500']}",
                file=sys.stderr,
            )
    print(
        json.dumps(
            {
                "machine": platform.platform(),
                "cores": os.cpu_count(),
                "steps": args.steps,
                "keys": args.keys,
                "repeats": args.repeats,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "write":
        url, token, experiment, index, steps, keys = sys.argv[2:8]
        write(url, token, experiment, int(index), int(steps), int(keys))
    else:
        main()
