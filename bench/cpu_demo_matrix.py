"""Benchmark: the `cpu-demo` matrix, from queueing it in the web app to its last run finished.

Troupe is started the way a user starts it — `scripts/run.py` (`make run`): gunicorn and one
Celery worker (concurrency 1) — on a fresh PostgreSQL database (`troupe_cpu_demo_<pid>`), a Redis
broker (its keys under a prefix of this process's own) and a private data directory that
borrows the prebuilt `tiny-s` model. Then:

1. `POST /api/v1/experiments` queues preset `cpu-demo` with the matrix 3 workflows (voting,
   eval_opt, orch_workers) × 2 tasks (math, code) × 2 sharing modes (shared, per_role):
   12 runs of 30 GRPO steps × 16 prompts × 8 rollouts, evaluated every 5 steps on the
   preset's held-out problems (64 until the demo-learning change, 256 since).
2. The runs list is polled until every run has finished.
3. Where the time went comes from what the runs logged, per run and in all:
   - rollout, update, evaluation: the sums of `sys/rollout_seconds`, `sys/update_seconds`
     and `sys/eval_seconds` (the base-model evaluation at step 0 included);
   - database: `sys/db_seconds`, the training thread's time in the database reporter
     (metric batches, progress, the cancel flag, checkpoint flushes; `workers/reporter.py`);
   - start-up and other: the rest of the run's wall time (started → finished in its row):
     importing torch, loading the model, checkpoints, metric bookkeeping;
   - between runs: the rest of the matrix's wall time — the worker handing the next run to
     a fresh pool process (one run per child) and claiming it.

`--repeats N` queues the matrix N times, one after another on the same instance; the report
gives each cell's median over the repeats and the median matrix.

    .venv/bin/python bench/cpu_demo_matrix.py              # the 12-run matrix (~8 min, 2 cores)
    .venv/bin/python bench/cpu_demo_matrix.py --repeats 5  # five of them, medians
    .venv/bin/python bench/cpu_demo_matrix.py --smoke      # 2 runs of 2 small steps
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script
from bench.common import DEFAULT_POSTGRES, drop_database, recreate_database  # noqa: E402
from bench.troupe_server import PYTHON, ROOT, free_port, wait_http  # noqa: E402
from vocabulary.names import (  # noqa: E402
    ACCURACY_KEY,
    DB_SECONDS_KEY,
    EVAL_SECONDS_KEY,
    PER_ROLE,
    ROLLOUT_SECONDS_KEY,
    SHARED,
    UPDATE_SECONDS_KEY,
)

DATABASE = f"troupe_cpu_demo_{os.getpid()}"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
MATRIX = {
    "workflow": ["voting", "eval_opt", "orch_workers"],
    "task": ["math", "code"],
    "sharing": [SHARED, PER_ROLE],
}
SMOKE_MATRIX = {"workflow": ["voting"], "task": ["math"], "sharing": [SHARED, PER_ROLE]}
SMOKE_CONFIG = {
    "steps": 2,
    "prompts_per_step": 2,
    "group_size": 2,
    "eval_every": 1,
    "eval_problems": 4,
    "checkpoint_every": 1,
}
PARTS = {  # what the table calls each part → the metric it sums
    "rollout": ROLLOUT_SECONDS_KEY,
    "update": UPDATE_SECONDS_KEY,
    "evaluation": EVAL_SECONDS_KEY,
    "database": DB_SECONDS_KEY,
}
FINISHED = {"succeeded", "failed", "cancelled"}

_SETUP = """
import json
from django.contrib.auth import get_user_model
from webapp.experiments.models import ApiToken
user, _ = get_user_model().objects.get_or_create(username="bench")
print(json.dumps({"token": ApiToken.issue(user, "bench")[1]}))
"""


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


class Troupe:
    """`scripts/run.py` on a fresh database; `with Troupe(...) as troupe:` → `troupe.api`."""

    def __init__(self, postgres: str, redis: str, models_from: Path):
        self.postgres, self.redis, self.models_from = postgres, redis, models_from
        self._tmp = tempfile.TemporaryDirectory(prefix="troupe-cpu-demo-")
        self.log = Path(self._tmp.name) / "run.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> Troupe:
        import requests

        data = Path(self._tmp.name) / "data"
        data.mkdir()
        # The runs are timed, not the one-off warm-start of the model: borrow it, built.
        (data / "models").symlink_to(self.models_from.resolve() / "models")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "DATABASE_URL": recreate_database(self.postgres, DATABASE),
            "CELERY_BROKER_URL": self.redis,
            "TROUPE_BROKER_PREFIX": f"troupe-bench-{os.getpid()}:",
            "TROUPE_DATA_DIR": str(data),
            "PORT": str(port),
            "DEBUG": "false",
        }
        manage = [PYTHON, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=env, check=True)
        out = subprocess.run(
            [*manage, "shell", "-c", _SETUP], env=env, check=True, capture_output=True, text=True
        ).stdout
        token = json.loads(out.strip().splitlines()[-1])["token"]
        say(f"make run: scripts/run.py on {self.url} (log: {self.log})")
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [PYTHON, str(ROOT / "scripts" / "run.py")],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_http(f"{self.url}/accounts/login/", self.proc, "scripts/run.py")
        self._wait_for_worker()
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {token}"
        return self

    def _wait_for_worker(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while " ready." not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # run.py stops gunicorn and the worker
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:
            drop_database(self.postgres, DATABASE)
        finally:
            self._tmp.cleanup()

    def call(self, method: str, path: str, **kwargs) -> dict:
        response = self.api.request(method, f"{self.url}/api/v1/{path}", timeout=30, **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} /api/v1/{path}: {response.text[:500]}")
        return response.json()


def run_matrix(troupe: Troupe, matrix: dict, config: dict) -> tuple[list[dict], float]:
    """Queue the matrix, wait for every run; returns the finished runs and the client's wall."""
    t0 = time.perf_counter()
    body = {"name": "cpu-demo matrix", "preset": "cpu-demo", "config": config, "matrix": matrix}
    experiment = troupe.call("POST", "experiments", json=body)
    say(f"queued experiment {experiment['id']}: {len(experiment['runs'])} runs")
    seen: dict[int, str] = {}
    while True:
        runs = troupe.call("GET", "runs", params={"experiment": experiment["id"]})["runs"]
        for run in runs:
            if seen.get(run["id"]) != run["status"]:
                seen[run["id"]] = run["status"]
                elapsed = time.perf_counter() - t0
                say(f"{elapsed:7.0f} s  run {run['id']} {run['label']}: {run['status']}")
        if all(run["status"] in FINISHED for run in runs):
            return runs, time.perf_counter() - t0
        if troupe.proc.poll() is not None:
            raise RuntimeError(f"scripts/run.py exited:\n{troupe.log.read_text()[-3000:]}")
        time.sleep(1.0)


def where_time_went(troupe: Troupe, run: dict) -> dict:
    keys = [*PARTS.values(), ACCURACY_KEY]
    series = troupe.call(
        "GET", f"runs/{run['id']}/metrics", params={"keys": ",".join(keys), "max_points": 0}
    )["series"]
    wall = seconds_between(run["started"], run["finished"])
    row = {"run": run["id"], "label": run["label"], "status": run["status"], "wall_s": wall}
    for part, key in PARTS.items():
        row[f"{part}_s"] = sum(v for v in series.get(key, {}).get("values", []) if v is not None)
    row["other_s"] = wall - sum(row[f"{part}_s"] for part in PARTS)
    accuracy = series.get(ACCURACY_KEY, {}).get("values") or [None]
    row["accuracy"] = {"base": accuracy[0], "peak": max(accuracy), "final": accuracy[-1]}
    return row


def summarize(runs: list[dict], rows: list[dict], client_wall: float) -> dict:
    """One matrix: its wall time (first queued → last finished) split into the parts."""
    first_queued = min(run["created"] for run in runs)
    last_finished = max(run["finished"] for run in runs)
    total = seconds_between(first_queued, last_finished)
    parts = {part: sum(row[f"{part}_s"] for row in rows) for part in [*PARTS, "other"]}
    parts["between runs"] = total - sum(row["wall_s"] for row in rows)
    return {
        "runs": len(rows),
        "succeeded": sum(row["status"] == "succeeded" for row in rows),
        "wall_s": total,
        "client_wall_s": client_wall,
        "median_run_s": statistics.median(row["wall_s"] for row in rows),
        "parts_s": parts,
    }


def median_of(matrices: list[dict]) -> dict:
    """The median matrix: each figure's median over the repeats."""
    parts = {
        part: statistics.median(m["parts_s"][part] for m in matrices)
        for part in matrices[0]["parts_s"]
    }
    wall = statistics.median(m["wall_s"] for m in matrices)
    return {
        "runs": sum(m["runs"] for m in matrices),
        "succeeded": sum(m["succeeded"] for m in matrices),
        "wall_s": wall,
        "wall_s_each": [m["wall_s"] for m in matrices],
        "client_wall_s": statistics.median(m["client_wall_s"] for m in matrices),
        "median_run_s": statistics.median(m["median_run_s"] for m in matrices),
        "parts_s": parts,
        "parts_frac": {part: seconds / wall for part, seconds in parts.items()},
    }


def print_report(summary: dict, rows: list[dict], file=sys.stdout) -> None:
    """Per matrix cell, the median over the repeats; then the matrix in all."""
    columns = ["wall", "rollout", "update", "evaluation", "database", "other"]
    print(
        f"\n{'run':<34} {'wall':>7} {'rollout':>8} {'update':>7} {'eval':>6} {'db':>5} "
        f"{'other':>6}  accuracy base → peak → final",
        file=file,
    )
    for label in dict.fromkeys(row["label"] for row in rows):
        same = [row for row in rows if row["label"] == label]
        cell = {c: statistics.median(row[f"{c}_s"] for row in same) for c in columns}
        accuracies = {json.dumps(row["accuracy"]) for row in same}
        acc = " → ".join("–" if v is None else f"{v:.3f}" for v in same[0]["accuracy"].values())
        if len(accuracies) > 1:
            acc += f" (differs across repeats: {len(accuracies)} variants)"
        print(
            f"{label[:34]:<34} {cell['wall']:7.1f} {cell['rollout']:8.1f} "
            f"{cell['update']:7.1f} {cell['evaluation']:6.1f} {cell['database']:5.2f} "
            f"{cell['other']:6.1f}  {acc}",
            file=file,
        )
    each = ", ".join(f"{s / 60:.2f}" for s in summary["wall_s_each"])
    matrices = len(summary["wall_s_each"])
    print(
        f"\n{summary['succeeded']}/{summary['runs']} runs succeeded; first queued → last "
        f"finished: median {summary['wall_s'] / 60:.2f} min over {matrices} matrices "
        f"({each} min); median run {summary['median_run_s']:.1f} s",
        file=file,
    )
    for part, seconds in summary["parts_s"].items():
        print(f"  {part:<13} {seconds:8.1f} s  {summary['parts_frac'][part]:6.1%}", file=file)


def ensure_model(models_from: Path) -> float:
    """Build `tiny-s` in `models_from` unless it is there; returns the seconds it took."""
    t0 = time.perf_counter()
    env = {**os.environ, "TROUPE_DATA_DIR": str(models_from)}
    subprocess.run(
        [PYTHON, "-m", "trainer", "build-model", "tiny-s"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=sys.stderr,
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--redis", default=os.environ.get("CELERY_BROKER_URL", DEFAULT_REDIS))
    parser.add_argument(
        "--models-from",
        type=Path,
        default=Path(os.environ.get("TROUPE_DATA_DIR") or ROOT / ".data"),
        help="a data directory whose models/ holds (or will hold) the built tiny-s",
    )
    parser.add_argument("--repeats", type=int, default=1, help="queue the matrix this many times")
    parser.add_argument("--smoke", action="store_true", help="2 runs of 2 small steps")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    if not args.redis.startswith(("redis://", "rediss://")):
        parser.error(f"--redis: {args.redis!r} is not a redis:// URL")

    build_s = ensure_model(args.models_from)
    matrix, config = (SMOKE_MATRIX, SMOKE_CONFIG) if args.smoke else (MATRIX, {})
    matrices, rows = [], []
    with Troupe(args.postgres, args.redis, args.models_from) as troupe:
        for repeat in range(1, args.repeats + 1):
            runs, client_wall = run_matrix(troupe, matrix, config)
            these = [{"repeat": repeat, **where_time_went(troupe, run)} for run in runs]
            matrices.append(summarize(runs, these, client_wall))
            rows += these
    summary = median_of(matrices)
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "matrix": matrix,
        "config": {"preset": "cpu-demo", **config},
        "model_ready_s": build_s,
        "smoke": args.smoke,
        **summary,
        "matrices": matrices,
        "per_run": rows,
    }
    if args.json:
        print_report(summary, rows, file=sys.stderr)
        print(json.dumps(result))
    else:
        print_report(summary, rows)
    if summary["succeeded"] != summary["runs"]:
        sys.exit(f"{summary['runs'] - summary['succeeded']} runs did not succeed")


if __name__ == "__main__":
    main()
