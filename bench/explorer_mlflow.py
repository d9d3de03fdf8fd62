"""Benchmark: MLflow's own run search beside Troupe's, on the same runs, through the real
MLflow client.

Starts both servers on free ports of 127.0.0.1, each on a fresh SQLite file (the embedded
default of each):

- Troupe: `gunicorn webapp.wsgi` (`--workers`), a user with an API token;
- MLflow: `mlflow server --backend-store-uri sqlite:///…` from `--mlflow-python`'s venv
  (`--workers`, access log and job runner off).

Then `bench/explorer_mlflow_client.py`, under MLflow's python, logs the same `--runs` runs to
both (each: `create_run`, one `log_batch` of `--keys` metric keys × `--steps` steps, three
params and a tag on every tenth run, `set_terminated`; four client threads; loading stops at
`--deadline` seconds and both hold the same runs), and times `MlflowClient.search_runs` for the
first page (50 runs) of each query, `--repeats` times, alternating which server goes first.
Last, on Troupe's database, the explorer (`webapp.explorer.query.explore`, in-process) pages
the same filters, for the row beside it in BENCHMARKS.md.

    .venv/bin/python bench/explorer_mlflow.py --mlflow-python /tmp/mlflow-venv/bin/python
    .venv/bin/python bench/explorer_mlflow.py --mlflow-python … --runs 200 --repeats 3  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from bench.common import load_average, log, machine  # noqa: E402
from bench.troupe_server import TroupeServer, start_mlflow, stop  # noqa: E402

CLIENT = ROOT / "bench" / "explorer_mlflow_client.py"

# The explorer's timing of the same filters on Troupe's database, in-process (run by
# `manage.py shell` with the server's environment, so it reads the server's SQLite file).
_EXPLORE = """
import json, statistics, sys, time
from webapp.explorer.fields import parse_columns, parse_sort, DEFAULT_COLUMNS
from webapp.explorer.query import explore
out = {}
for name, text, order in json.loads(sys.stdin.read()):
    extra = [order.split()[0]] if order.startswith("metrics.") else []
    columns = parse_columns([*DEFAULT_COLUMNS, *extra])
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        table = explore(text, columns, parse_sort(order))
        times.append(time.perf_counter() - start)
    out[name] = {"median_s": statistics.median(times), "s": times, "total": table.total}
print(json.dumps(out))
"""


class SqliteMlflow:
    """`mlflow server` on a fresh SQLite file; `with SqliteMlflow(python, workers) as url:`."""

    def __init__(self, python: str, workers: int):
        self.python, self.workers = python, workers
        self._tmp = tempfile.TemporaryDirectory(prefix="mlflow-explorer-bench-")
        self.proc = None

    def __enter__(self) -> str:
        store = f"sqlite:///{self._tmp.name}/mlflow.db"
        log(f"mlflow: server, {self.workers} workers, {store}")
        artifacts = ["--default-artifact-root", f"file://{self._tmp.name}/artifacts"]
        self.proc, url = start_mlflow(self.python, self._tmp.name, store, artifacts, self.workers)
        return url

    def __exit__(self, *exc) -> None:
        stop(self.proc)
        self._tmp.cleanup()


def client_half(args, troupe: TroupeServer, mlflow_url: str) -> dict:
    """Load both servers and time their searches (MLflow's python, the real client)."""
    command = [args.mlflow_python, str(CLIENT), "--a", troupe.url, "--b", mlflow_url]
    for name in ("runs", "keys", "steps", "deadline", "repeats"):
        command += [f"--{name}", str(getattr(args, name))]
    env = {**os.environ, "MLFLOW_TRACKING_TOKEN": troupe.token}
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode:
        raise SystemExit("the MLflow client half failed (its errors are above)")
    return json.loads(done.stdout.strip().splitlines()[-1])


def explorer_half(args, troupe: TroupeServer, queries: dict) -> dict:
    """The explorer's in-process timing of the same filters on Troupe's database."""
    script = _EXPLORE.replace("REPEATS", str(args.repeats))
    wanted = [[name, q["filter"], q["order"]] for name, q in queries.items()]
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", script],
        input=json.dumps(wanted),
        env=troupe.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"{statistics.median(ms):.0f} ms ({ms[0]:.0f}–{ms[-1]:.0f})"


def report(result: dict, explorer: dict, args, loads: list) -> None:
    print(f"machine: {machine()}; load average before {loads[0]}, after {loads[1]}")
    print(
        f"{result['runs']} runs × {args.keys} metric keys × {args.steps} steps, loaded in "
        f"{result['load_s']:.0f} s; first page of 50, {args.repeats} alternating repeats, "
        "median (min–max)"
    )
    print("| query | MLflow search_runs | Troupe search_runs | Troupe explorer | same page |")
    print("|---|---|---|---|---|")
    for name, q in result["queries"].items():
        print(
            f"| {name} | {spread(q['b_s'])} | {spread(q['a_s'])} | "
            f"{spread(explorer[name]['s'])} | {q['same_first_page']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-python", default="/tmp/mlflow-venv/bin/python")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=1200.0, help="seconds of loading")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2, help="each server's")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not Path(args.mlflow_python).exists():
        raise SystemExit(f"No MLflow python at {args.mlflow_python}: see --mlflow-python.")
    before = load_average()
    with SqliteMlflow(args.mlflow_python, args.workers) as mlflow_url:
        with TroupeServer("sqlite", "explorer_mlflow", workers=args.workers) as troupe:
            result = client_half(args, troupe, mlflow_url)
            explorer = explorer_half(args, troupe, result["queries"])
    loads = [before, load_average()]
    if args.json:
        print(json.dumps({"result": result, "explorer": explorer, "load": loads}))
        return
    report(result, explorer, args, loads)


if __name__ == "__main__":
    main()
