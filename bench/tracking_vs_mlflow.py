"""Benchmark: Troupe's tracking API against MLflow's tracking server, same PostgreSQL, same machine.

Both servers are started by this script on free ports, each on a fresh database of the same
PostgreSQL server, and driven only through their REST APIs:

- Troupe: `gunicorn webapp.wsgi --workers 4` on database `troupe_bench` (migrated; a user with
  an API token and one experiment made with `manage.py`), bearer-token requests to
  `POST /api/v1/runs`, `POST /api/v1/runs/<id>/metrics`, `GET /api/v1/runs/<id>/metrics`.
- MLflow: `mlflow server --backend-store-uri postgresql+psycopg2://…/mlflow_bench --workers 4`
  (uvicorn, its default; access log and the GenAI job runner off, as Troupe has neither),
  requests to `runs/create`, `runs/log-batch` (at most 1,000 metrics a request, its limit),
  `metrics/get-history` and the UI's sampled `ajax-api/…/metrics/get-history-bulk-interval`.

Workload (the same points, pre-encoded, for both): `--runs` 8 runs × `--keys` 24 keys ×
`--steps` 2,000 steps, logged step by step in batches of `--batch` 1,000 points by `--clients`
4 concurrent clients (threads, each with its own keep-alive HTTP session, two runs each).
Each repeat creates fresh runs on both servers, in alternating order (ABBA), and measures:

1. ingestion: points per second over the whole workload (wall time, all clients);
2. full read: 4 full series of each run (Troupe one request a run with `max_points=0`,
   MLflow one `get-history` a key), one client, all runs;
3. compare read: the 4 keys of every run, as a compare view needs them: Troupe downsampled on
   the server to 500 points a series; MLflow full (`get-history`), and — for reference —
   MLflow's own sampled read that its UI uses (`get-history-bulk-interval`, 500 a run);
4. once, on the last repeat: one batch replayed 5 times (the identical request, as an HTTP
   retry sends it; and for MLflow also 5 times with fresh timestamps, as a resumed job logs
   the same steps again), then every stored point of that run counted through the API.

Medians over `--repeats` (≥5) repeats, and the ratios. Set up MLflow once, in a venv of its
own (it is not a Troupe dependency; SQLAlchemy 2.1 defaults to psycopg 3, hence the explicit
`postgresql+psycopg2` URI):

    python3 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow psycopg2-binary
    .venv/bin/python bench/tracking_vs_mlflow.py --mlflow-python /tmp/mlflow-venv/bin/python
    .venv/bin/python bench/tracking_vs_mlflow.py --smoke   # tiny; Troupe alone if no MLflow
    .venv/bin/python bench/tracking_vs_mlflow.py --smoke --without-mlflow   # (CI's smoke)

`--postgres` names the server (default postgres://postgres@127.0.0.1:5432/postgres); the
databases are dropped and re-created at the start and dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.client_threads import timed_clients  # noqa: E402
from bench.common import (  # noqa: E402
    DEFAULT_MLFLOW_PYTHON,
    DEFAULT_POSTGRES,
    abba,
    chosen_mlflow_python,
    drop_database,
    each_of,
    log,
    median_of,
    mlflow_available,
    ratio,
    recreate_database,
    smoke_suffix,
)
from bench.troupe_server import TroupeServer, points_body, start_mlflow, stop  # noqa: E402
from vocabulary.names import ENTROPY, GRAD_NORM, GRAD_SHARE, KL, PG_LOSS, TOKENS, role_key  # noqa: E402

MLFLOW_BATCH_LIMIT = 1000  # metrics per log-batch request (MLflow's documented limit)
COMPARE_POINTS = 500
REPLAYS = 5


# --- the workload ------------------------------------------------------------------------------


def metric_keys(n: int) -> list[str]:
    roles = ("generator", "aggregator", "evaluator", "solver")
    stats = (GRAD_NORM, GRAD_SHARE, ENTROPY, KL, TOKENS, PG_LOSS)
    names = [role_key(r, s) for r in roles for s in stats]
    return [*names, *(f"extra/k{i}" for i in range(max(0, n - len(names))))][:n]


def run_points(run: int, keys: list[str], steps: int) -> list[tuple[str, int, float]]:
    """Step-major (every key of step 0, then step 1, …), as a trainer logs them."""
    rng = random.Random(run)
    phase = [rng.random() * 6 for _ in keys]
    return [
        (key, step, math.sin(step / 50 + phase[j]) + 0.1 * rng.random())
        for step in range(steps)
        for j, key in enumerate(keys)
    ]


def batches(points: list, size: int) -> list[list]:
    return [points[i : i + size] for i in range(0, len(points), size)]


# --- MLflow ------------------------------------------------------------------------------------


class MlflowServer:
    """`mlflow server` on a fresh database; `with MlflowServer(...) as server:`."""

    def __init__(
        self,
        python: str,
        postgres: str,
        database: str,
        workers: int = 4,
        serve_artifacts: bool = False,
    ):
        self.serve_artifacts = serve_artifacts  # `--serve-artifacts`, files in its temp dir
        self.python = python
        self.postgres = postgres
        self.database = database
        self.workers = workers
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="mlflow-bench-")
        self.url = ""

    def __enter__(self) -> MlflowServer:
        url = recreate_database(self.postgres, self.database)
        store = url.replace("postgres://", "postgresql+psycopg2://", 1)
        artifacts = (
            ["--serve-artifacts", "--artifacts-destination", f"{self._tmp.name}/store"]
            if self.serve_artifacts
            else ["--default-artifact-root", f"file://{self._tmp.name}"]
        )
        log(f"mlflow: server, {self.workers} workers (first start migrates)")
        self.proc, self.url = start_mlflow(
            self.python, self._tmp.name, store, artifacts, self.workers
        )
        return self

    def __exit__(self, *exc) -> None:
        stop(self.proc)
        try:
            drop_database(self.postgres, self.database)
        finally:
            self._tmp.cleanup()


class MlflowClient:
    """MLflow's REST API (2.0) over one keep-alive HTTP session."""

    def __init__(self, url: str):
        self.url = url
        self.http = requests.Session()

    def _call(self, method: str, path: str, **kwargs) -> dict:
        response = self.http.request(method, f"{self.url}{path}", **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.text[:300]}")
        return response.json()

    def create_experiment(self, name: str) -> str:
        body = {"name": name}
        return self._call("POST", "/api/2.0/mlflow/experiments/create", json=body)["experiment_id"]

    def create_run(self, experiment: str, name: str) -> str:
        body = {"experiment_id": experiment, "run_name": name, "start_time": _now_ms()}
        return self._call("POST", "/api/2.0/mlflow/runs/create", json=body)["run"]["info"]["run_id"]

    def log_batch(self, body: bytes) -> None:
        self._call(
            "POST",
            "/api/2.0/mlflow/runs/log-batch",
            data=body,
            headers={"Content-Type": "application/json"},
        )

    def history(self, run_id: str, key: str) -> list[dict]:
        """Every point of one series, following `next_page_token`."""
        out, token = [], None
        while True:
            params = {"run_id": run_id, "metric_key": key}
            if token:
                params["page_token"] = token
            page = self._call("GET", "/api/2.0/mlflow/metrics/get-history", params=params)
            out += page.get("metrics", [])
            token = page.get("next_page_token")
            if not token:
                return out

    def sampled(self, run_ids: list[str], key: str, max_results: int) -> list[dict]:
        params = {"run_ids": run_ids, "metric_key": key, "max_results": max_results}
        path = "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
        return self._call("GET", path, params=params).get("metrics", [])


def _now_ms() -> int:
    return int(time.time() * 1000)


def mlflow_body(run_id: str, points: list[tuple[str, int, float]], timestamp: int) -> bytes:
    metrics = [{"key": k, "value": v, "timestamp": timestamp, "step": s} for k, s, v in points]
    return json.dumps({"run_id": run_id, "metrics": metrics}).encode()


# --- the two sides, behind one interface ---------------------------------------------------


class Side:
    """What the measurements need from a tracking server."""

    name = ""

    def client(self): ...

    def create_runs(self, n: int, tag: str) -> list: ...

    def encode(self, run, points) -> bytes: ...

    def send(self, client, run, body: bytes) -> None: ...

    def read_full(self, client, run, keys) -> int: ...

    def compare(self, client, runs, keys) -> int: ...

    def count(self, client, run, keys) -> int: ...


class TroupeSide(Side):
    name = "troupe"

    def __init__(self, server: TroupeServer):
        self.server = server

    def client(self):
        return self.server.session()

    def create_runs(self, n: int, tag: str) -> list[int]:
        client = self.client()
        return [client.create_run(self.server.experiment, f"{tag}-{i}") for i in range(n)]

    def encode(self, run, points) -> bytes:
        return points_body(points)

    def send(self, client, run, body: bytes) -> None:
        client.post_points(run, body)

    def read_full(self, client, run, keys) -> int:
        return sum(len(s["steps"]) for s in client.series(run, keys, 0).values())

    def compare(self, client, runs, keys) -> int:
        return sum(
            len(s["steps"])
            for run in runs
            for s in client.series(run, keys, COMPARE_POINTS).values()
        )

    def count(self, client, run, keys) -> int:
        return sum(len(s["steps"]) for s in client.series(run, None, 0).values())


class MlflowSide(Side):
    name = "mlflow"

    def __init__(self, server: MlflowServer):
        self.server = server
        self.experiment = MlflowClient(server.url).create_experiment(f"bench-{uuid.uuid4().hex}")

    def client(self):
        return MlflowClient(self.server.url)

    def create_runs(self, n: int, tag: str) -> list[str]:
        client = self.client()
        return [client.create_run(self.experiment, f"{tag}-{i}") for i in range(n)]

    def encode(self, run, points) -> bytes:
        return mlflow_body(run, points, _now_ms())

    def send(self, client, run, body: bytes) -> None:
        client.log_batch(body)

    def read_full(self, client, run, keys) -> int:
        return sum(len(client.history(run, key)) for key in keys)

    def compare(self, client, runs, keys) -> int:
        return sum(len(client.history(run, key)) for run in runs for key in keys)

    def compare_sampled(self, client, runs, keys) -> int:
        return sum(len(client.sampled(runs, key, COMPARE_POINTS)) for key in keys)

    def count(self, client, run, keys) -> int:
        return self.read_full(client, run, keys)


# --- measurements ------------------------------------------------------------------------------


def ingest(side: Side, args, keys: list[str], tag: str) -> tuple[list, float, bytes]:
    """Create `args.runs` runs and log the workload into them.

    Returns (runs, points/s, the request body of run 0's first batch, for the replay)."""
    runs = side.create_runs(args.runs, tag)
    work = []  # per client: [(run, body), ...] in logging order
    for c in range(args.clients):
        mine = []
        for r in range(c, args.runs, args.clients):
            for batch in batches(run_points(r, keys, args.steps), args.batch):
                mine.append((runs[r], side.encode(runs[r], batch)))
        work.append(mine)

    def client_loop(items) -> None:
        client = side.client()
        for run, body in items:
            side.send(client, run, body)

    seconds = timed_clients(work, client_loop)
    total = args.runs * len(keys) * args.steps
    return runs, total / seconds, work[0][0][1]


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    n = fn()
    return time.perf_counter() - started, n


def measure(side: Side, args, keys: list[str], tag: str) -> dict:
    runs, rate, first_body = ingest(side, args, keys, tag)
    client = side.client()
    read_keys = keys[:4]
    full_s, full_n = timed(lambda: sum(side.read_full(client, r, read_keys) for r in runs))
    expected = len(runs) * len(read_keys) * args.steps
    if full_n != expected:
        raise RuntimeError(f"{side.name}: full read returned {full_n} points, not {expected}")
    cmp_s, cmp_n = timed(lambda: side.compare(client, runs, read_keys))
    row = {
        "points_per_s": rate,
        "full_read_s": full_s,
        "compare_s": cmp_s,
        "compare_points": cmp_n,
        "runs": runs,
        "first_body": first_body,
    }
    if isinstance(side, MlflowSide):
        row["compare_sampled_s"], row["compare_sampled_points"] = timed(
            lambda: side.compare_sampled(client, runs, read_keys)
        )
    return row


def replay(side: Side, args, keys: list[str], row: dict) -> dict:
    """Resend run 0's first batch 5 times, then count every stored point of run 0.

    The identical request is what an HTTP retry sends. MLflow's points carry a client
    timestamp, so a job that resumes and logs the same steps again sends them with new
    timestamps: that is replayed 5 times more for MLflow (Troupe's points have no timestamp,
    so its replay is the same request either way)."""
    client = side.client()
    run = row["runs"][0]
    out = {"expected": len(keys) * args.steps}
    for _ in range(REPLAYS):
        side.send(client, run, row["first_body"])
    out["after_identical_replays"] = side.count(client, run, keys)
    if isinstance(side, MlflowSide):
        first = batches(run_points(0, keys, args.steps), args.batch)[0]
        for _ in range(REPLAYS):
            time.sleep(0.002)  # a later wall-clock time, as a resumed job has
            side.send(client, run, side.encode(run, first))
        out["after_relogs_new_timestamps"] = side.count(client, run, keys)
    return out


def report(results: dict[str, list[dict]], replays: dict[str, dict], args, note: str) -> dict:
    summary: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "workload": f"{args.runs} runs x {args.keys} keys x {args.steps} steps, batches of "
        f"{args.batch}, {args.clients} clients, {args.repeats} repeats",
    }
    if note:
        summary["note"] = note
    for name, rows in results.items():
        summary[name] = {
            "points_per_s": median_of(rows, "points_per_s"),
            "full_read_s": median_of(rows, "full_read_s", 4),
            "compare_s": median_of(rows, "compare_s", 4),
            "compare_points": rows[-1]["compare_points"],
            "all_points_per_s": each_of(rows, "points_per_s"),
        }
        if name == "mlflow":
            summary[name]["compare_sampled_s"] = median_of(rows, "compare_sampled_s", 4)
            summary[name]["compare_sampled_points"] = rows[-1]["compare_sampled_points"]
        summary[name]["replay"] = replays.get(name)
    if "mlflow" in results:
        t, m = summary["troupe"], summary["mlflow"]
        summary["ratios"] = {
            "ingestion (troupe / mlflow points/s)": ratio(t, m, "points_per_s"),
            "full read (mlflow s / troupe s)": ratio(t, m, "full_read_s", higher_is_better=False),
            "compare (mlflow full s / troupe s)": ratio(t, m, "compare_s", higher_is_better=False),
            # Troupe has no sampled read of its own: set against its one compare read.
            "compare (mlflow sampled s / troupe s)": round(
                m["compare_sampled_s"] / t["compare_s"], 2
            ),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mlflow-python",
        default=os.environ.get("MLFLOW_PYTHON"),
        help=f"python of a venv with mlflow and psycopg2 (default $MLFLOW_PYTHON, else "
        f"{DEFAULT_MLFLOW_PYTHON} when it exists)",
    )
    parser.add_argument("--without-mlflow", action="store_true", help="Troupe's side only")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--keys", type=int, default=24)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny workload, 1 repeat")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    args.mlflow_python = chosen_mlflow_python(args)
    suffix = smoke_suffix(args.smoke)
    if args.smoke:
        args.runs, args.keys, args.steps, args.batch = 2, 4, 50, 100
        args.clients, args.workers, args.repeats = 2, 2, 1
    if args.batch > MLFLOW_BATCH_LIMIT:
        parser.error(f"--batch: MLflow takes at most {MLFLOW_BATCH_LIMIT} metrics a request")
    note = ""
    with_mlflow = mlflow_available(args.mlflow_python)
    if not with_mlflow:
        note = (
            f"MLflow is not available (--mlflow-python {args.mlflow_python!r}): "
            "Troupe's side only; see the module docstring to set MLflow up"
        )
        log(note)
        if not args.smoke:
            sys.exit(2)
    keys = metric_keys(args.keys)
    results: dict[str, list[dict]] = {"troupe": []}
    replays: dict[str, dict] = {}
    with TroupeServer(args.postgres, f"troupe_bench{suffix}", args.workers, log=log) as troupe:
        sides: list[Side] = [TroupeSide(troupe)]
        mlflow_ctx = None
        try:
            if with_mlflow:
                mlflow_ctx = MlflowServer(
                    args.mlflow_python, args.postgres, f"mlflow_bench{suffix}", args.workers
                ).__enter__()
                sides.append(MlflowSide(mlflow_ctx))
                results["mlflow"] = []
            for rep in range(args.repeats):
                for side in abba(sides, rep):
                    row = measure(side, args, keys, f"rep{rep}")
                    results[side.name].append(row)
                    log(
                        f"repeat {rep + 1}/{args.repeats} {side.name}: "
                        f"{row['points_per_s']:.0f} points/s, full read {row['full_read_s']:.3f}"
                        f" s, compare {row['compare_s']:.3f} s, load {os.getloadavg()[0]:.2f}"
                    )
            for side in sides:
                replays[side.name] = replay(side, args, keys, results[side.name][-1])
        finally:
            if mlflow_ctx is not None:
                mlflow_ctx.__exit__(None, None, None)
    summary = report(results, replays, args, note)
    if args.json:
        print(json.dumps(summary))
        return
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
