"""Benchmark: artifact upload and download through the real MLflow client, against MLflow's own
server with `--serve-artifacts` and against Troupe's proxied artifact store
(/api/2.0/mlflow-artifacts/), same machine, same PostgreSQL server, one invocation.

Both servers are started here (Troupe: `gunicorn webapp.wsgi`, a private TROUPE_DATA_DIR;
MLflow: `mlflow server --serve-artifacts --artifacts-destination <temp dir>`; `--workers`
each; server plumbing from bench/tracking_vs_mlflow.py, whose docstring says how MLflow's
venv is made). Per repeat (ABBA order), each side gets a fresh run and `--files` files of
`--mib` MiB of random bytes (made before the clock), uploaded one after another with
`MlflowClient.log_artifact`, then downloaded one after another with
`MlflowClient.download_artifacts` into a fresh folder; every download is checked byte for
byte. Throughput = bytes / wall time; medians over `--repeats` and the ratios Troupe / MLflow.

Many small files (`--small-files N`: each upload used to walk the run's whole
folder for its quota): each side gets another fresh run and N files of `--small-kib` KiB,
uploaded one after another with `log_artifact`; files/s over the whole upload, and the median
milliseconds a file over the first and the last tenth (flat when an upload's cost does not
grow with the folder). `--small-files 0` skips it; `--mib 0` skips the large files.

    .venv/bin/python bench/mlflow_artifacts.py --mlflow-python /tmp/mlflow-venv/bin/python
    .venv/bin/python bench/mlflow_artifacts.py --smoke --without-mlflow   # tiny, Troupe only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.tracking_vs_mlflow import (  # noqa: E402
    DEFAULT_MLFLOW_PYTHON,
    MlflowServer,
    log,
    mlflow_available,
)
from bench.troupe_server import TroupeServer  # noqa: E402

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")

import mlflow  # noqa: E402
from mlflow import MlflowClient  # noqa: E402

MIB = 1024 * 1024


def measure(name: str, url: str, experiment: str, files: list[Path], tag: str) -> dict:
    """Upload then download every file on one server; MiB/s each way."""
    mlflow.set_tracking_uri(url)  # where the client resolves `mlflow-artifacts:/` URIs
    os.environ["MLFLOW_TRACKING_URI"] = url
    client = MlflowClient(tracking_uri=url)
    run_id = client.create_run(experiment, run_name=f"{name}-{tag}").info.run_id
    total = sum(f.stat().st_size for f in files)
    start = time.perf_counter()
    for path in files:
        client.log_artifact(run_id, str(path))
    up = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="artifact-bench-down-") as down:
        start = time.perf_counter()
        got = [Path(client.download_artifacts(run_id, f.name, down)) for f in files]
        seconds = time.perf_counter() - start
        for source, local in zip(files, got, strict=True):
            assert local.read_bytes() == source.read_bytes(), f"{name}: {source.name} differs"
    client.set_terminated(run_id)
    return {
        "upload_mib_s": total / MIB / up,
        "download_mib_s": total / MIB / seconds,
        "upload_s": up,
        "download_s": seconds,
    }


def measure_small(name: str, url: str, experiment: str, files: list[Path], tag: str) -> dict:
    """Upload many small files into one run, one after another: files/s, and ms a file over
    the first and the last tenth of them."""
    mlflow.set_tracking_uri(url)
    os.environ["MLFLOW_TRACKING_URI"] = url
    client = MlflowClient(tracking_uri=url)
    run_id = client.create_run(experiment, run_name=f"{name}-small-{tag}").info.run_id
    each = []
    start = time.perf_counter()
    for path in files:
        before = time.perf_counter()
        client.log_artifact(run_id, str(path))
        each.append(time.perf_counter() - before)
    seconds = time.perf_counter() - start
    listed = client.list_artifacts(run_id)
    assert len(listed) == len(files), f"{name}: {len(listed)} of {len(files)} files listed"
    client.set_terminated(run_id)
    tenth = max(1, len(files) // 10)
    return {
        "small_files_per_s": len(files) / seconds,
        "small_files_s": seconds,
        "first_tenth_ms": 1000 * statistics.median(each[:tenth]),
        "last_tenth_ms": 1000 * statistics.median(each[-tenth:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-python", default=os.environ.get("MLFLOW_PYTHON"))
    parser.add_argument("--without-mlflow", action="store_true", help="Troupe's side only")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=64, help="size of each file (0: none)")
    parser.add_argument("--small-files", type=int, default=1000, help="many small files")
    parser.add_argument("--small-kib", type=int, default=1, help="size of each small file")
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny workload, 1 repeat")
    args = parser.parse_args()
    if args.without_mlflow:
        args.mlflow_python = ""
    elif args.mlflow_python is None and Path(DEFAULT_MLFLOW_PYTHON).exists():
        args.mlflow_python = DEFAULT_MLFLOW_PYTHON
    suffix = ""
    if args.smoke:
        args.files, args.mib, args.workers, args.repeats = 2, 1, 2, 1
        args.small_files = 20
        suffix = f"_smoke_{os.getpid()}"
    with_mlflow = mlflow_available(args.mlflow_python)
    if not with_mlflow and not args.smoke:
        log(f"MLflow is not available (--mlflow-python {args.mlflow_python!r})")
        sys.exit(2)
    load_before = round(os.getloadavg()[0], 2)
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="artifact-bench-up-") as up:
        files = []
        for i in range(args.files if args.mib else 0):
            files.append(Path(up, f"blob-{i}.bin"))
            files[-1].write_bytes(os.urandom(args.mib * MIB))
        Path(up, "small").mkdir()
        small = []
        for i in range(args.small_files):
            small.append(Path(up, "small", f"note-{i:05d}.txt"))
            small[-1].write_bytes(os.urandom(args.small_kib * 1024))
        with TroupeServer(
            args.postgres, f"troupe_artifact_bench{suffix}", args.workers, log=log
        ) as troupe:
            os.environ["MLFLOW_TRACKING_TOKEN"] = troupe.token  # MLflow's server ignores it
            made = MlflowClient(tracking_uri=troupe.url).create_experiment("artifacts")
            sides = [("troupe", troupe.url, made)]
            server = None
            try:
                if with_mlflow:
                    server = MlflowServer(
                        args.mlflow_python,
                        args.postgres,
                        f"mlflow_artifact_bench{suffix}",
                        args.workers,
                        serve_artifacts=True,
                    ).__enter__()
                    made = MlflowClient(tracking_uri=server.url).create_experiment("artifacts")
                    sides.append(("mlflow", server.url, made))
                for rep in range(args.repeats):
                    for name, url, experiment in sides if rep % 2 == 0 else sides[::-1]:
                        row = {}
                        with contextlib.redirect_stdout(sys.stderr):  # the client's notes
                            if files:
                                row |= measure(name, url, experiment, files, f"rep{rep}")
                            if small:
                                row |= measure_small(name, url, experiment, small, f"rep{rep}")
                        rows.setdefault(name, []).append(row)
                        log(
                            f"repeat {rep + 1}/{args.repeats} {name}: "
                            + ", ".join(f"{k} {v:.1f}" for k, v in row.items())
                        )
            finally:
                if server is not None:
                    server.__exit__(None, None, None)
    workload = ("files", "mib", "small_files", "small_kib", "workers", "repeats")
    summary: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "workload": {k: getattr(args, k) for k in workload},
    }
    measures = [
        *(["upload_mib_s", "download_mib_s"] if files else []),
        *(["small_files_per_s", "first_tenth_ms", "last_tenth_ms"] if small else []),
    ]
    for name, measured in rows.items():
        summary[name] = {
            f"{m}_median": round(statistics.median(r[m] for r in measured), 1) for m in measures
        } | {f"{m}_each": [round(r[m], 1) for r in measured] for m in measures}
    if "mlflow" in summary:
        t, m = summary["troupe"], summary["mlflow"]
        parts = []
        ratios = {
            "upload": "upload_mib_s",
            "download": "download_mib_s",
            "small_files": "small_files_per_s",
        }
        for label, key in ratios.items():
            if f"{key}_median" in t:
                summary[f"ratio_{label}"] = round(t[f"{key}_median"] / m[f"{key}_median"], 2)
                parts.append(
                    f"{label} {t[f'{key}_median']} vs {m[f'{key}_median']} = "
                    f"{summary[f'ratio_{label}']}x"
                )
        summary["summary"] = (
            f"artifacts, {len(files)} x {args.mib} MiB and {len(small)} x {args.small_kib} KiB: "
            + "; ".join(parts)
            + " (Troupe / MLflow --serve-artifacts; MiB/s, small files a "
            f"second) | load average {summary['load_before']} before, {summary['load_after']} "
            "after"
        )
    print(json.dumps(summary, indent=2))
    if "summary" in summary:
        log(summary["summary"])


if __name__ == "__main__":
    main()
