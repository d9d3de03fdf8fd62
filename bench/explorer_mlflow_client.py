"""The MLflow-client half of `bench/explorer_mlflow.py`, run by MLflow's own python (it needs
only `mlflow`): loads the same runs into two tracking servers through the real client, then
times `MlflowClient.search_runs` against both with the same filter and order.

Not run by hand: `bench/explorer_mlflow.py` starts both servers and calls it as
`<mlflow python> bench/explorer_mlflow_client.py --a URL --b URL ...`, the bearer token for
Troupe in MLFLOW_TRACKING_TOKEN (MLflow's server, without auth, ignores it). Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vocabulary, plain Python
from vocabulary.names import PER_ROLE, SHARED  # noqa: E402

SHARINGS = (SHARED, PER_ROLE)
LRS = ("1e-05", "3e-05", "0.0001")
# (name, filter, order): the explorer bench's own queries, in the REST API's dialect
QUERIES = (
    ("newest", "", "attributes.start_time DESC"),
    (
        "metric filter",
        "params.sharing = 'per_role' and metrics.m007 > 0.4 and tags.note LIKE '%lr%'",
        "metrics.m007 DESC",
    ),
    ("param and metric", "params.lr = '1e-05' and metrics.m001 < 0.5", "metrics.m001 ASC"),
)


def run_content(i: int, keys: int, steps: int, t0: int):
    """Run `i`'s params, tags and points: the same on both servers (seeded by `i`)."""
    rng = random.Random(i)
    params = [
        Param("sharing", SHARINGS[i % 2]),
        Param("lr", LRS[i % 3]),
        Param("seed", str(i % 5)),
    ]
    tags = [RunTag("note", "try a lower lr")] if i % 10 == 1 else []
    metrics = [
        Metric(f"m{k:03d}", rng.random(), t0 + 1000 * step, step)
        for k in range(keys)
        for step in range(steps)
    ]
    return params, tags, metrics


def load(clients, experiments, args) -> int:
    """Log runs 0, 1, … into both servers, four at a time, until `--runs` or `--deadline`
    seconds: both always hold the same runs. Returns how many were loaded."""
    stop_at = time.monotonic() + args.deadline
    t0 = int(time.time() * 1000)

    def one(i: int) -> bool:
        if time.monotonic() > stop_at:
            return False
        params, tags, metrics = run_content(i, args.keys, args.steps, t0)
        for client, experiment in zip(clients, experiments, strict=True):
            run = client.create_run(experiment, start_time=t0 + i, run_name=f"run {i:05d}")
            client.log_batch(run.info.run_id, metrics=metrics, params=params, tags=tags)
            client.set_terminated(run.info.run_id, end_time=t0 + i + 1000)
        return True

    loaded = 0
    with ThreadPoolExecutor(args.threads) as pool:
        for start in range(0, args.runs, 200):
            done = list(pool.map(one, range(start, min(start + 200, args.runs))))
            loaded += sum(done)
            print(f"  loaded {loaded} runs", file=sys.stderr, flush=True)
            if not all(done):
                break
    return loaded


def search(clients, experiments, repeats: int) -> dict:
    """Each query's first page (50 runs) from both servers, alternating which goes first."""
    out = {}
    for name, text, order in QUERIES:
        times = {"a": [], "b": []}
        names = {}
        for repeat in range(repeats):
            sides = ["a", "b"] if repeat % 2 == 0 else ["b", "a"]
            for side in sides:
                k = 0 if side == "a" else 1
                start = time.perf_counter()
                page = clients[k].search_runs(
                    [experiments[k]], filter_string=text, order_by=[order], max_results=50
                )
                times[side].append(time.perf_counter() - start)
                names[side] = [run.info.run_name for run in page]
        out[name] = {
            "filter": text,
            "order": order,
            **{f"{side}_s": times[side] for side in times},
            **{f"{side}_median_s": statistics.median(times[side]) for side in times},
            "same_first_page": names["a"] == names["b"],
            "matches_on_page": [len(names["a"]), len(names["b"])],
        }
        print(f"  {name}: " + ", ".join(f"{t * 1000:.0f}" for t in times["a"]), file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="Troupe's URL")
    parser.add_argument("--b", required=True, help="MLflow's URL")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=1200.0, help="seconds of loading")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    clients = [MlflowClient(tracking_uri=args.a), MlflowClient(tracking_uri=args.b)]
    suffix = str(int(time.time()))
    experiments = [c.create_experiment(f"explorer bench {suffix}") for c in clients]
    started = time.monotonic()
    loaded = load(clients, experiments, args)
    load_s = time.monotonic() - started
    results = search(clients, experiments, args.repeats)
    print(json.dumps({"runs": loaded, "load_s": round(load_s, 1), "queries": results}))


if __name__ == "__main__":
    main()
