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
    return {"upload_mib_s": total / MIB / up, "download_mib_s": total / MIB / seconds,
            "upload_s": up, "download_s": seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-python", default=os.environ.get("MLFLOW_PYTHON"))
    parser.add_argument("--without-mlflow", action="store_true", help="Troupe's side only")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=64, help="size of each file")
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
        suffix = f"_smoke_{os.getpid()}"
    with_mlflow = mlflow_available(args.mlflow_python)
    if not with_mlflow and not args.smoke:
        log(f"MLflow is not available (--mlflow-python {args.mlflow_python!r})")
        sys.exit(2)
    load_before = round(os.getloadavg()[0], 2)
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="artifact-bench-up-") as up:
        files = []
        for i in range(args.files):
            files.append(Path(up, f"blob-{i}.bin"))
            files[-1].write_bytes(os.urandom(args.mib * MIB))
        with TroupeServer(args.postgres, f"troupe_artifact_bench{suffix}", args.workers,
                          log=log) as troupe:  # fmt: skip
            os.environ["MLFLOW_TRACKING_TOKEN"] = troupe.token  # MLflow's server ignores it
            made = MlflowClient(tracking_uri=troupe.url).create_experiment("artifacts")
            sides = [("troupe", troupe.url, made)]
            server = None
            try:
                if with_mlflow:
                    server = MlflowServer(args.mlflow_python, args.postgres,
                                          f"mlflow_artifact_bench{suffix}", args.workers,
                                          serve_artifacts=True).__enter__()  # fmt: skip
                    made = MlflowClient(tracking_uri=server.url).create_experiment("artifacts")
                    sides.append(("mlflow", server.url, made))
                for rep in range(args.repeats):
                    for name, url, experiment in sides if rep % 2 == 0 else sides[::-1]:
                        with contextlib.redirect_stdout(sys.stderr):  # the client's notes
                            row = measure(name, url, experiment, files, f"rep{rep}")
                        rows.setdefault(name, []).append(row)
                        log(f"repeat {rep + 1}/{args.repeats} {name}: up "
                            f"{row['upload_mib_s']:.0f} MiB/s, down "
                            f"{row['download_mib_s']:.0f} MiB/s")  # fmt: skip
            finally:
                if server is not None:
                    server.__exit__(None, None, None)
    summary: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "workload": {k: getattr(args, k) for k in ("files", "mib", "workers", "repeats")},
    }
    for name, measured in rows.items():
        summary[name] = {
            f"{way}_mib_s_median": round(statistics.median(r[f"{way}_mib_s"] for r in measured), 1)
            for way in ("upload", "download")
        } | {
            f"{way}_mib_s_each": [round(r[f"{way}_mib_s"], 1) for r in measured]
            for way in ("upload", "download")
        }  # fmt: skip
    if "mlflow" in summary:
        t, m = summary["troupe"], summary["mlflow"]
        for way in ("upload", "download"):
            summary[f"ratio_{way}"] = round(t[f"{way}_mib_s_median"] / m[f"{way}_mib_s_median"], 2)
        summary["summary"] = (
            f"artifacts, {args.files} x {args.mib} MiB: upload {t['upload_mib_s_median']} vs "
            f"{m['upload_mib_s_median']} MiB/s = {summary['ratio_upload']}x; download "
            f"{t['download_mib_s_median']} vs {m['download_mib_s_median']} MiB/s = "
            f"{summary['ratio_download']}x (Troupe / MLflow --serve-artifacts) | load average "
            f"{summary['load_before']} before, {summary['load_after']} after"
        )
    print(json.dumps(summary, indent=2))
    if "summary" in summary:
        log(summary["summary"])


if __name__ == "__main__":
    main()
