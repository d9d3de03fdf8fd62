"""Benchmark: the same MLflow client workload against MLflow's own tracking server and against
Troupe's MLflow endpoint (/api/2.0/mlflow/), same PostgreSQL server, one invocation.

Both servers are started here on fresh databases (Troupe: `gunicorn webapp.wsgi`, MLflow:
`mlflow server`, `--workers` each; see bench/tracking_vs_mlflow.py, whose server plumbing this
reuses). The client is the real `mlflow.MlflowClient` (requirements-dev.txt), pointed at each
server in turn; Troupe's token goes in MLFLOW_TRACKING_TOKEN (MLflow's server ignores it).

1. ingestion: `--runs` 8 runs × `--keys` 24 keys × `--steps` 2,000 steps through
   `MlflowClient.log_batch`, step-major batches of at most 1,000 metrics (MLflow's limit: 41
   steps × 24 keys), `--clients` 4 threads with two runs each; points/s = points the client
   logged / wall time. Keys as the study's fork logs them: `actor/<role>/grad_norm|kl|pg_loss|
   pg_clipfrac` for 4 roles (Troupe also stores each under `role/<role>/…`: 16 of the 24 keys
   are written twice there) and 8 other keys. The Metric objects are built before the clock.
2. history: `MlflowClient.get_metric_history` of one 10,000-step series (`--history-steps`),
   `--reads` times on each server alternately; the two answers are checked to be identical.

Both are also measured on the wire, to separate the servers from the client they share: the
same log-batch bodies, encoded by MLflow's own `message_to_json` before the clock, POSTed by
the same threads with `requests`; the same get-history request with `requests` + `json.loads`.
The client's own work (protobuf encoding of each batch, ~40 ms a 984-metric batch here; and
parsing 10,000 metrics into `Metric` objects, ~0.3 s) is the same for both servers and bounds
the client-observed ratios.

Medians over `--repeats` (ABBA order) and the ratios Troupe / MLflow. MLflow lives in a venv of
its own (bench/tracking_vs_mlflow.py's docstring says how):

    .venv/bin/python bench/mlflow_endpoint.py --mlflow-python /tmp/mlflow-venv/bin/python
    .venv/bin/python bench/mlflow_endpoint.py --smoke --without-mlflow   # tiny, Troupe only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.client_threads import timed_clients  # noqa: E402
from bench.common import (  # noqa: E402
    DEFAULT_POSTGRES,
    abba,
    chosen_mlflow_python,
    comparison_head,
    each_of,
    log,
    median_of,
    mlflow_wanted,
    one_minute_load,
    print_summary,
    ratio,
    smoke_suffix,
)
from bench.tracking_vs_mlflow import MlflowServer  # noqa: E402
from bench.troupe_server import TroupeServer  # noqa: E402
from vocabulary.names import LOSS_KEY  # noqa: E402

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")

import requests  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import Metric  # noqa: E402
from mlflow.protos.service_pb2 import LogBatch  # noqa: E402
from mlflow.utils.proto_json_utils import message_to_json  # noqa: E402

BATCH_LIMIT = 1000
ROLES = ("generator", "aggregator", "evaluator", "solver")
WORKLOAD = ("runs", "keys", "steps", "clients", "workers", "repeats", "history_steps", "reads")


def metric_keys(n: int) -> list[str]:
    fork = [f"actor/{r}/{m}" for r in ROLES for m in ("grad_norm", "kl", "pg_loss", "pg_clipfrac")]
    other = [
        "critic/advantages/mean",
        "perf/throughput",
        "timing_s/gen",
        "timing_s/update",
        "response_length/max",
        "prompt_length/mean",
        "actor/lr",
        "perf/memory",
    ]
    return [*fork, *other][:n] + [f"extra/k{i}" for i in range(max(0, n - 24))]


def run_batches(run: int, keys: list[str], steps: int, timestamp: int) -> list[list[Metric]]:
    """Step-major batches of whole steps, each at most BATCH_LIMIT metrics."""
    per_batch = max(1, BATCH_LIMIT // len(keys))
    out = []
    for start in range(0, steps, per_batch):
        out.append(
            [
                Metric(key, math.sin(step / 50 + j + run) + step / 1e4, timestamp + step, step)
                for step in range(start, min(steps, start + per_batch))
                for j, key in enumerate(keys)
            ]
        )
    return out


class Side:
    def __init__(self, name: str, url: str, experiment: str):
        self.name, self.url, self.experiment = name, url, experiment

    def client(self) -> MlflowClient:
        return MlflowClient(tracking_uri=self.url)


def ingest(side: Side, args, keys: list[str], tag: str) -> dict:
    client = side.client()
    runs = [
        client.create_run(side.experiment, run_name=f"{tag}-{i}").info.run_id
        for i in range(args.runs)
    ]
    stamp = int(time.time() * 1000)
    work = [(run_id, run_batches(i, keys, args.steps, stamp)) for i, run_id in enumerate(runs)]
    shares = [work[i :: args.clients] for i in range(args.clients)]

    def client_loop(items) -> None:
        own = side.client()
        for run_id, batches in items:
            for batch in batches:
                own.log_batch(run_id, metrics=batch, synchronous=True)

    seconds = timed_clients(shares, client_loop)
    logged = args.runs * len(keys) * args.steps
    stored = len(client.get_metric_history(runs[-1], keys[0]))
    assert stored == args.steps, f"{side.name}: {stored} of {args.steps} points came back"
    with contextlib.redirect_stdout(sys.stderr):  # the client prints a link per run it ends
        for run_id in runs:
            client.set_terminated(run_id)
    return {"points": logged, "seconds": seconds, "points_per_s": logged / seconds}


def ingest_wire(side: Side, args, keys: list[str], tag: str) -> dict:
    """The same workload as `ingest`, its bodies encoded before the clock (by MLflow's own
    encoder, as the client does) and sent with plain `requests`."""
    client = side.client()
    runs = [
        client.create_run(side.experiment, run_name=f"{tag}-wire-{i}").info.run_id
        for i in range(args.runs)
    ]
    stamp = int(time.time() * 1000)
    work = [
        [
            message_to_json(LogBatch(run_id=run_id, metrics=[m.to_proto() for m in batch]))
            for batch in run_batches(i, keys, args.steps, stamp)
        ]
        for i, run_id in enumerate(runs)
    ]
    shares = [work[i :: args.clients] for i in range(args.clients)]
    url = f"{side.url}/api/2.0/mlflow/runs/log-batch"
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}",
    }

    def client_loop(items) -> None:
        with requests.Session() as session:
            for bodies in items:
                for body in bodies:
                    response = session.post(url, data=body, headers=headers, timeout=120)
                    if response.status_code != 200:
                        raise RuntimeError(f"{response.status_code} {response.text[:200]}")

    seconds = timed_clients(shares, client_loop)
    logged = args.runs * len(keys) * args.steps
    assert len(client.get_metric_history(runs[-1], keys[0])) == args.steps
    return {"points": logged, "seconds": seconds, "points_per_s": logged / seconds}


def read_history_wire(side: Side, run_id: str) -> float:
    headers = {"Authorization": f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"}
    start = time.perf_counter()
    response = requests.get(
        f"{side.url}/api/2.0/mlflow/metrics/get-history",
        params={"run_id": run_id, "metric_key": LOSS_KEY},
        headers=headers,
        timeout=120,
    )
    metrics = json.loads(response.content)["metrics"]
    seconds = time.perf_counter() - start
    assert len(metrics) > 0
    return seconds


def history_run(side: Side, steps: int) -> str:
    client = side.client()
    run_id = client.create_run(side.experiment, run_name="history").info.run_id
    stamp = int(time.time() * 1000)
    for start in range(0, steps, BATCH_LIMIT):
        batch = [
            Metric(LOSS_KEY, 1 / (1 + s), stamp + s, s)
            for s in range(start, min(steps, start + BATCH_LIMIT))
        ]
        client.log_batch(run_id, metrics=batch, synchronous=True)
    return run_id


def read_history(side: Side, run_id: str) -> tuple[float, list]:
    client = side.client()
    start = time.perf_counter()
    history = client.get_metric_history(run_id, LOSS_KEY)
    seconds = time.perf_counter() - start
    return seconds, [(m.step, m.value, m.timestamp) for m in history]


def parse_args() -> argparse.Namespace:
    """The command line; `--smoke` makes the workload tiny."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-python", default=os.environ.get("MLFLOW_PYTHON"))
    parser.add_argument("--without-mlflow", action="store_true", help="Troupe's side only")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--keys", type=int, default=24)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--history-steps", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny workload, 1 repeat")
    args = parser.parse_args()
    args.mlflow_python = chosen_mlflow_python(args)
    if args.smoke:
        args.runs, args.keys, args.steps, args.clients, args.workers = 2, 4, 60, 2, 2
        args.repeats, args.history_steps, args.reads = 1, 1500, 2
    return args


def measure_ingestion(sides: list[Side], args, keys: list[str]) -> dict[str, list[dict]]:
    """The workload `--repeats` times on every side (ABBA), through the client and on the wire:
    a row a repeat for each side."""
    rows: dict[str, list[dict]] = {}
    for rep in range(args.repeats):
        for side in abba(sides, rep):
            row = ingest(side, args, keys, f"rep{rep}")
            wire = ingest_wire(side, args, keys, f"rep{rep}")
            rows.setdefault(side.name, []).append(
                {"points_per_s": row["points_per_s"], "wire_points_per_s": wire["points_per_s"]}
            )
            log(
                f"repeat {rep + 1}/{args.repeats} {side.name}: "
                f"{row['points_per_s']:.0f} points/s ({row['seconds']:.1f} s), wire "
                f"{wire['points_per_s']:.0f}, load {os.getloadavg()[0]:.2f}"
            )
    return rows


def measure_history(sides: list[Side], args) -> dict[str, list[dict]]:
    """One `--history-steps` series on every side, read `--reads` times (ABBA) through the
    client and on the wire: a row a read for each side. The sides' answers must agree."""
    history_runs = {side.name: history_run(side, args.history_steps) for side in sides}
    reads: dict[str, list[dict]] = {}
    answers = {}
    for i in range(args.reads):
        for side in abba(sides, i):
            seconds, answers[side.name] = read_history(side, history_runs[side.name])
            wire_seconds = read_history_wire(side, history_runs[side.name])
            reads.setdefault(side.name, []).append(
                {"history_s": seconds, "wire_history_s": wire_seconds}
            )
    assert len(answers["troupe"]) == args.history_steps
    if "mlflow" in answers:
        assert [a[:2] for a in answers["troupe"]] == [a[:2] for a in answers["mlflow"]]
    return reads


def measure_both(args, with_mlflow: bool) -> tuple[dict, dict]:
    """Start Troupe's server (and MLflow's, `with_mlflow`) on fresh databases and measure
    each: (ingestion rows, history reads), by side."""
    suffix = smoke_suffix(args.smoke)
    keys = metric_keys(args.keys)
    with TroupeServer(args.postgres, f"troupe_mlflow_bench{suffix}", args.workers, log=log) as t:
        os.environ["MLFLOW_TRACKING_TOKEN"] = t.token  # MLflow's server ignores it
        experiment = MlflowClient(tracking_uri=t.url).create_experiment("mlflow-bench")
        sides = [Side("troupe", t.url, experiment)]
        mlflow_server = (
            MlflowServer(
                args.mlflow_python, args.postgres, f"mlflow_endpoint_bench{suffix}", args.workers
            )
            if with_mlflow
            else contextlib.nullcontext()
        )
        with mlflow_server as server:
            if server is not None:
                made = MlflowClient(tracking_uri=server.url).create_experiment("bench")
                sides.append(Side("mlflow", server.url, made))
            return measure_ingestion(sides, args, keys), measure_history(sides, args)


def side_summary(ingestion: list[dict], reads: list[dict]) -> dict:
    """One side's medians and every repeat's figure: points/s whole, history seconds to 4 places."""
    out = {}
    for rows, key, digits in (
        (ingestion, "points_per_s", None),
        (reads, "history_s", 4),
        (ingestion, "wire_points_per_s", None),
        (reads, "wire_history_s", 4),
    ):
        out[f"{key}_median"] = median_of(rows, key, digits)
        out[f"{key}_each"] = each_of(rows, key, digits)
    return out


def summarise(args, load_before: float, ingestion: dict, reads: dict) -> dict:
    """The printed result: the head, each side's figures and, with MLflow's side, the ratios
    (above 1: Troupe ahead) and the one-line summary."""
    summary = comparison_head(args, WORKLOAD, load_before)
    for name in ingestion:
        summary[name] = side_summary(ingestion[name], reads[name])
    if "mlflow" in summary:
        t, m = summary["troupe"], summary["mlflow"]
        summary["ratio_points_per_s"] = ratio(t, m, "points_per_s_median")
        summary["ratio_history"] = ratio(t, m, "history_s_median", higher_is_better=False)
        summary["ratio_wire_points_per_s"] = ratio(t, m, "wire_points_per_s_median")
        summary["ratio_wire_history"] = ratio(t, m, "wire_history_s_median", higher_is_better=False)
        summary["summary"] = summary_line(summary)
    return summary


def main() -> None:
    args = parse_args()
    with_mlflow = mlflow_wanted(args)
    load_before = one_minute_load()
    ingestion, reads = measure_both(args, with_mlflow)
    print_summary(summarise(args, load_before, ingestion, reads))


def summary_line(summary: dict) -> str:
    """One line with both targets' ratios, through the client and on the wire, and the load."""
    t, m = summary["troupe"], summary["mlflow"]
    return (
        f"target >= 5x both: MlflowClient.log_batch {t['points_per_s_median']:,} vs "
        f"{m['points_per_s_median']:,} points/s = {summary['ratio_points_per_s']}x; "
        f"get_metric_history {t['history_s_median']} vs {m['history_s_median']} s = "
        f"{summary['ratio_history']}x | servers only (wire): log-batch "
        f"{summary['ratio_wire_points_per_s']}x, get-history {summary['ratio_wire_history']}x | "
        f"load average {summary['load_before']} before, {summary['load_after']} after"
    )


if __name__ == "__main__":
    main()
