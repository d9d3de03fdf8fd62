"""Benchmark: metric ingestion and series reads through Troupe's JSON API, on PostgreSQL.

Starts the real web server (`gunicorn webapp.wsgi`, `--workers` 4) on a fresh database of the
PostgreSQL server (bench/troupe_server.py) and measures, `--repeats` times (≥5; medians):

1. ingestion: `--clients` 4 concurrent clients (threads, each with its own keep-alive HTTP
   session and its own external run) POST `--batches` batches of `--batch` 1,000 points to
   `/api/v1/runs/<id>/metrics`, bodies encoded beforehand; points per second = all points /
   wall time from the start signal to the last answer. Target ≥ 50,000 points/s.
2. read: one run holding 24 series × 2,000 steps (48,000 points, written beforehand through
   the API); `GET /api/v1/runs/<id>/metrics?max_points=500` (every key, each downsampled to
   500 points on the server) `--reads` 20 times, one client; the median request time. The
   client and server share the loopback, so this is the server's time plus well under a
   millisecond. Target ≤ 100 ms.

    .venv/bin/python bench/ingest.py                 # the table for BENCHMARKS.md
    .venv/bin/python bench/ingest.py --repeats 1 --batches 5 --reads 3   # a quick look

`--postgres` names the server (default postgres://postgres@127.0.0.1:5432/postgres); the
database `troupe_bench_ingest` is dropped and re-created at the start and dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.troupe_server import TroupeServer, points_body  # noqa: E402
from vocabulary.names import GRAD_NORM, role_key  # noqa: E402

KEYS = [role_key(f"r{i:02d}", GRAD_NORM) for i in range(24)]  # 24 series, as a 4-role run logs
READ_STEPS = 2000
INGEST_TARGET = 50_000  # points/s
READ_TARGET = 0.100  # s


def batches_for(keys: list[str], first_step: int, batch: int, count: int) -> list[bytes]:
    """`count` request bodies of `batch` points: every key at consecutive steps."""
    bodies, step, points = [], first_step, []
    while len(bodies) < count:
        for key in keys:
            points.append((key, step, 1.0 / (1 + step) + len(key) * 1e-3))
            if len(points) == batch:
                bodies.append(points_body(points))
                points = []
        step += 1
    return bodies


def ingest(server: TroupeServer, clients: int, batch: int, batches: int, repeat: int) -> float:
    """Points per second, all clients together."""
    sessions = [server.session() for _ in range(clients)]
    runs = [s.create_run(server.experiment, f"ingest {repeat}.{i}") for i, s in enumerate(sessions)]
    bodies = [batches_for(KEYS, 0, batch, batches) for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def client(i: int) -> None:
        start.wait()
        try:
            for body in bodies[i]:
                sessions[i].post_points(runs[i], body)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    return clients * batches * batch / seconds


def read(server: TroupeServer, reads: int, repeat: int) -> float:
    """Median seconds of one downsampled read of a 24 × 2,000-point run."""
    session = server.session()
    run = session.create_run(server.experiment, f"read {repeat}")
    for body in batches_for(KEYS, 0, 1000, len(KEYS) * READ_STEPS // 1000):
        session.post_points(run, body)
    series = session.series(run, None, 500)  # warm: connection, caches, plans
    assert len(series) == len(KEYS) and all(len(s["steps"]) <= 500 for s in series.values())
    assert sum(len(s["steps"]) for s in session.series(run, None, 0).values()) == 48_000
    times = []
    for _ in range(reads):
        began = time.perf_counter()
        session.series(run, None, 500)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({cpu}), {system}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=50, help="batches per client per repeat")
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    args = parser.parse_args()

    rates, reads = [], []
    with TroupeServer(args.postgres, "troupe_bench_ingest", workers=args.workers) as server:
        ingest(server, args.clients, args.batch, 2, repeat=-1)  # warm-up
        for repeat in range(args.repeats):
            rates.append(ingest(server, args.clients, args.batch, args.batches, repeat))
            reads.append(read(server, args.reads, repeat))
            print(
                f"repeat {repeat + 1}: {rates[-1]:,.0f} points/s, read {reads[-1] * 1000:.1f} ms",
                file=sys.stderr,
                flush=True,
            )

    rate, latency = statistics.median(rates), statistics.median(reads)
    print(f"\nMachine: {machine()}")
    print(
        f"gunicorn --workers {args.workers}; {args.clients} clients × {args.batches} batches "
        f"× {args.batch} points; read: 24 series × {READ_STEPS} steps → 500 points each; "
        f"medians of {args.repeats} repeats\n"
    )
    print("| measurement | median | range | target | met |")
    print("|---|---|---|---|---|")
    print(
        f"| ingestion, points/s | {rate:,.0f} | {min(rates):,.0f} – {max(rates):,.0f} | "
        f"≥ {INGEST_TARGET:,} | {'yes' if rate >= INGEST_TARGET else 'no'} |"
    )
    print(
        f"| read 24 × 2,000 → 500, ms | {latency * 1000:.1f} | {min(reads) * 1000:.1f} – "
        f"{max(reads) * 1000:.1f} | ≤ {READ_TARGET * 1000:.0f} | "
        f"{'yes' if latency <= READ_TARGET else 'no'} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
