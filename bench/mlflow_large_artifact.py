"""Benchmark: one large artifact (200 MiB by default) through the real MLflow client into
Troupe, whole and in parts, with the server's memory watched: the issue's "a 200 MB file",
too slow for the test suite (tests/webapp/test_mlflow_multipart.py sends 96 MiB).

Troupe runs as `bench/troupe_server.py` starts it (`gunicorn webapp.wsgi`, `--workers` sync
workers, a fresh PostgreSQL database, a private TROUPE_DATA_DIR). A file of random bytes is
written a MiB at a time (its SHA-256 taken on the way), then, for each way of sending it:
`MlflowClient.log_artifact` into a fresh run (whole: one streamed PUT; multipart:
MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD=true, the client's default 10 MiB parts, sent by its
thread pool), `download_artifacts` into a fresh folder and its SHA-256 compared. Memory: the
peak resident set (VmHWM) of each server worker, read from /proc before and after; the
largest growth of one worker is reported beside the file's size.

    .venv/bin/python bench/mlflow_large_artifact.py [--mib 200]
    .venv/bin/python bench/mlflow_large_artifact.py --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.troupe_server import TroupeServer  # noqa: E402

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "600")

from mlflow import MlflowClient  # noqa: E402

MIB = 1024 * 1024


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(MIB):
            digest.update(block)
    return digest.hexdigest()


def peaks(pid: int) -> dict[int, float]:
    """VmHWM in MiB of each child of the gunicorn master `pid` (its workers)."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The command name is in parentheses and may hold spaces; the parent pid follows.
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                status = (entry / "status").read_text()
                found[int(entry.name)] = int(status.split("VmHWM:")[1].split()[0]) / 1024
    return found


def measure(troupe: TroupeServer, experiment: str, source: Path, expected: str, way: str) -> dict:
    os.environ["MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD"] = str(way == "multipart").lower()
    client = MlflowClient(tracking_uri=troupe.url)
    run_id = client.create_run(experiment, run_name=way).info.run_id
    client.log_text(run_id, "warm", "warm.txt")  # the artifact code paths, loaded
    before = peaks(troupe.proc.pid)
    start = time.perf_counter()
    client.log_artifact(run_id, str(source))
    up = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="large-artifact-down-") as down:
        start = time.perf_counter()
        got = Path(client.download_artifacts(run_id, source.name, down))
        seconds = time.perf_counter() - start
        assert sha256(got) == expected, f"{way}: the download differs"
    after = peaks(troupe.proc.pid)
    growth = max(after[p] - before.get(p, after[p]) for p in after)
    size = source.stat().st_size / MIB
    return {
        "upload_s": round(up, 2),
        "upload_mib_s": round(size / up, 1),
        "download_s": round(seconds, 2),
        "download_mib_s": round(size / seconds, 1),
        "worker_peak_growth_mib": round(growth, 1),
        "worker_peak_mib": round(max(after.values()), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--mib", type=int, default=200, help="size of the file")
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--smoke", action="store_true", help="an 8 MiB file")
    args = parser.parse_args()
    suffix = ""
    if args.smoke:
        args.mib, args.workers, suffix = 8, 2, f"_smoke_{os.getpid()}"
    os.environ.setdefault("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(MIB))
    load_before = round(os.getloadavg()[0], 2)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="large-artifact-up-") as up:
        source = Path(up, "weights.bin")
        digest = hashlib.sha256()
        with source.open("wb") as out:
            for _ in range(args.mib):
                block = os.urandom(MIB)
                digest.update(block)
                out.write(block)
        with TroupeServer(
            args.postgres, f"troupe_large_artifact_bench{suffix}", args.workers, log=log
        ) as troupe:
            os.environ["MLFLOW_TRACKING_TOKEN"] = troupe.token
            experiment = MlflowClient(tracking_uri=troupe.url).create_experiment("large")
            for way in ("whole", "multipart"):
                with contextlib.redirect_stdout(sys.stderr):  # the client's notes
                    rows[way] = measure(troupe, experiment, source, digest.hexdigest(), way)
                log(f"{way}: {json.dumps(rows[way])}")
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "file_mib": args.mib,
        "workers": args.workers,
        **rows,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
