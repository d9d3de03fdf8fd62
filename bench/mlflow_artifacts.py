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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

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

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")

import mlflow  # noqa: E402
from mlflow import MlflowClient  # noqa: E402

MIB = 1024 * 1024
WORKLOAD = ("files", "mib", "small_files", "small_kib", "workers", "repeats")
RATIOS = {
    "upload": "upload_mib_s",
    "download": "download_mib_s",
    "small_files": "small_files_per_s",
}


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


def parse_args() -> argparse.Namespace:
    """The command line; `--smoke` makes the workload tiny."""
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
    args.mlflow_python = chosen_mlflow_python(args)
    if args.smoke:
        args.files, args.mib, args.workers, args.repeats = 2, 1, 2, 1
        args.small_files = 20
    return args


def make_files(folder: str, args) -> tuple[list[Path], list[Path]]:
    """Random bytes in `folder`, made before any clock starts: `--files` files of `--mib` MiB
    (none with `--mib 0`), and `--small-files` of `--small-kib` KiB in `small/`."""
    files = []
    for i in range(args.files if args.mib else 0):
        files.append(Path(folder, f"blob-{i}.bin"))
        files[-1].write_bytes(os.urandom(args.mib * MIB))
    Path(folder, "small").mkdir()
    small = []
    for i in range(args.small_files):
        small.append(Path(folder, "small", f"note-{i:05d}.txt"))
        small[-1].write_bytes(os.urandom(args.small_kib * 1024))
    return files, small


def measure_repeats(sides: list[tuple], args, files: list[Path], small: list[Path]) -> dict:
    """`--repeats` repeats on every side (ABBA), each the large files then the small ones, on
    fresh runs: a row a repeat for each side."""
    rows: dict[str, list[dict]] = {}
    for rep in range(args.repeats):
        for name, url, experiment in abba(sides, rep):
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
    return rows


def measure_both(args, with_mlflow: bool, files: list[Path], small: list[Path]) -> dict:
    """Start Troupe's server (and MLflow's with `--serve-artifacts`, `with_mlflow`) on fresh
    databases and measure each: its rows, by side."""
    suffix = smoke_suffix(args.smoke)
    with TroupeServer(
        args.postgres, f"troupe_artifact_bench{suffix}", args.workers, log=log
    ) as troupe:
        os.environ["MLFLOW_TRACKING_TOKEN"] = troupe.token  # MLflow's server ignores it
        made = MlflowClient(tracking_uri=troupe.url).create_experiment("artifacts")
        sides = [("troupe", troupe.url, made)]
        mlflow_server = (
            MlflowServer(
                args.mlflow_python,
                args.postgres,
                f"mlflow_artifact_bench{suffix}",
                args.workers,
                serve_artifacts=True,
            )
            if with_mlflow
            else contextlib.nullcontext()
        )
        with mlflow_server as server:
            if server is not None:
                made = MlflowClient(tracking_uri=server.url).create_experiment("artifacts")
                sides.append(("mlflow", server.url, made))
            return measure_repeats(sides, args, files, small)


def add_ratios(summary: dict, args, n_files: int, n_small: int) -> None:
    """Troupe / MLflow for each measure taken (above 1: Troupe ahead), and the one-line
    summary."""
    t, m = summary["troupe"], summary["mlflow"]
    parts = []
    for label, key in RATIOS.items():
        if f"{key}_median" in t:
            summary[f"ratio_{label}"] = ratio(t, m, f"{key}_median")
            parts.append(
                f"{label} {t[f'{key}_median']} vs {m[f'{key}_median']} = "
                f"{summary[f'ratio_{label}']}x"
            )
    summary["summary"] = (
        f"artifacts, {n_files} x {args.mib} MiB and {n_small} x {args.small_kib} KiB: "
        + "; ".join(parts)
        + " (Troupe / MLflow --serve-artifacts; MiB/s, small files a "
        f"second) | load average {summary['load_before']} before, {summary['load_after']} "
        "after"
    )


def summarise(args, load_before: float, rows: dict, n_files: int, n_small: int) -> dict:
    """The printed result: the head, each side's medians then every repeat's figures (to one
    decimal place), and with MLflow's side the ratios and the one-line summary."""
    summary = comparison_head(args, WORKLOAD, load_before)
    measures = [
        *(["upload_mib_s", "download_mib_s"] if n_files else []),
        *(["small_files_per_s", "first_tenth_ms", "last_tenth_ms"] if n_small else []),
    ]
    for name, measured in rows.items():
        summary[name] = {f"{m}_median": median_of(measured, m, 1) for m in measures} | {
            f"{m}_each": each_of(measured, m, 1) for m in measures
        }
    if "mlflow" in summary:
        add_ratios(summary, args, n_files, n_small)
    return summary


def main() -> None:
    args = parse_args()
    with_mlflow = mlflow_wanted(args)
    load_before = one_minute_load()
    with tempfile.TemporaryDirectory(prefix="artifact-bench-up-") as up:
        files, small = make_files(up, args)
        rows = measure_both(args, with_mlflow, files, small)
    print_summary(summarise(args, load_before, rows, len(files), len(small)))


if __name__ == "__main__":
    main()
