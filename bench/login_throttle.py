"""Benchmark: API latency while wrong-password loops hammer the login page, with the sign-in
throttle on (Troupe's default) and off, in one invocation.

For each side, the real web server (`gunicorn webapp.wsgi`, `--workers` 4) on a fresh
database of the PostgreSQL server (bench/troupe_server.py), with a user `bench` who has a
password and an API token:

1. quiet: `--requests` sequential `GET /api/v1/runs/<id>` with the bearer token, one client;
   the median request time;
2. attacked: the same requests while `--attackers` 4 processes each loop over `POST
   /accounts/login/` with a wrong password for `bench` (CSRF token from the form, as a
   browser sends it); the median request time, and how many attempts were made and how many
   were refused with 429.

The throttle is off when its limits are set out of reach (TROUPE_LOGIN_MAX_FAILURES and
TROUPE_LOGIN_ADDRESS_MAX_FAILURES = 10^9): every attempt then costs a PBKDF2 hash, which is
what starves the API. Sides alternate (on, off, off, on, …) over `--repeats`; medians.

    .venv/bin/python bench/login_throttle.py           # the table for BENCHMARKS.md
    .venv/bin/python bench/login_throttle.py --smoke --json   # seconds: does it still run?

`--postgres` names the server (default postgres://postgres@127.0.0.1:5432/postgres); the
database `troupe_bench_login` is dropped and re-created for each side and dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import DEFAULT_POSTGRES  # noqa: E402
from bench.ingest import machine  # noqa: E402
from bench.troupe_server import PYTHON, ROOT, TroupeServer  # noqa: E402

PASSWORD = "bench password 7e1c"
OFF = str(10**9)  # limits no loop reaches: the throttle is off

# Setting a password revokes the user's tokens (webapp/accounts/signals.py): a new one after.
_SET_PASSWORD = f"""
from django.contrib.auth import get_user_model
from webapp.experiments.models import ApiToken
user = get_user_model().objects.get(username="bench")
user.set_password({PASSWORD!r})
user.save()
print(ApiToken.issue(user, "bench")[1])
"""


def attack(url: str, stop, counts) -> None:
    """One wrong-password loop, as a script would run it: the form's CSRF token, then POSTs."""
    http = requests.Session()
    page = http.get(f"{url}/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    tries = refused = 0
    while not stop.is_set():
        response = http.post(
            f"{url}/accounts/login/",
            data={"username": "bench", "password": f"wrong {tries}", "csrfmiddlewaretoken": token},
            allow_redirects=False,
        )
        tries += 1
        refused += response.status_code == 429
    with counts.get_lock():
        counts[0] += tries
        counts[1] += refused


def api_median(http: requests.Session, url: str, requests_: int) -> float:
    times = []
    for _ in range(requests_):
        began = time.perf_counter()
        response = http.get(url)
        times.append(time.perf_counter() - began)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:200]}")
    return statistics.median(times)


def measure(postgres: str, throttled: bool, workers: int, attackers: int, requests_: int) -> dict:
    limits = (
        {}
        if throttled
        else {"TROUPE_LOGIN_MAX_FAILURES": OFF, "TROUPE_LOGIN_ADDRESS_MAX_FAILURES": OFF}
    )
    saved = {name: os.environ.get(name) for name in limits}
    os.environ.update(limits)  # the server's environment is copied from ours
    try:
        with TroupeServer(postgres, "troupe_bench_login", workers=workers) as server:
            out = subprocess.run(
                [PYTHON, str(ROOT / "manage.py"), "shell", "-c", _SET_PASSWORD],
                env=server.env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            server.token = out.strip().splitlines()[-1]
            client = server.session()
            run_id = client.create_run(server.experiment, "latency probe")
            url = f"{server.url}/api/v1/runs/{run_id}"
            api_median(client.http, url, 5)  # warm-up: connections, imports
            quiet = api_median(client.http, url, requests_)
            stop = multiprocessing.Event()
            counts = multiprocessing.Array("q", 2)
            loops = [
                multiprocessing.Process(target=attack, args=(server.url, stop, counts))
                for _ in range(attackers)
            ]
            for loop in loops:
                loop.start()
            time.sleep(1.0)  # the loops are under way
            attacked = api_median(client.http, url, requests_)
            stop.set()
            for loop in loops:
                loop.join(60)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return {
        "throttled": throttled,
        "quiet_ms": quiet * 1000,
        "attacked_ms": attacked * 1000,
        "attempts": counts[0],
        "refused": counts[1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side (ABBA order)")
    parser.add_argument("--requests", type=int, default=100, help="API requests per measurement")
    parser.add_argument("--attackers", type=int, default=4, help="wrong-password loops")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--smoke", action="store_true", help="a seconds-long check")
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.requests, args.attackers, args.workers = 1, 5, 1, 2

    order = [True, False, False, True] * args.repeats
    rows = {True: [], False: []}
    for throttled in order[: 2 * args.repeats]:
        row = measure(args.postgres, throttled, args.workers, args.attackers, args.requests)
        rows[throttled].append(row)
        side = "on " if throttled else "off"
        print(
            f"throttle {side}: quiet {row['quiet_ms']:.1f} ms, attacked {row['attacked_ms']:.1f}"
            f" ms; {row['attempts']} attempts, {row['refused']} refused",
            file=sys.stderr,
            flush=True,
        )

    def median(throttled: bool, field: str) -> float:
        return statistics.median(row[field] for row in rows[throttled])

    summary = {
        side: {
            field: median(throttled, field)
            for field in ("quiet_ms", "attacked_ms", "attempts", "refused")
        }
        for side, throttled in (("on", True), ("off", False))
    }
    on, off = summary["on"], summary["off"]
    print(f"\nMachine: {machine()}")
    print(
        f"gunicorn --workers {args.workers}; {args.attackers} wrong-password loops; "
        f"{args.requests} API requests a measurement; medians of {args.repeats} "
        f"repeat(s) a side\n"
    )
    print(
        "| throttle | API median, quiet | API median, under attack | slowdown | "
        "attempts (refused with 429) |"
    )
    print("|---|---:|---:|---:|---|")
    for side, row in (("on (default)", on), ("off", off)):
        print(
            f"| {side} | {row['quiet_ms']:.1f} ms | {row['attacked_ms']:.1f} ms | "
            f"{row['attacked_ms'] / row['quiet_ms']:.1f}× | "
            f"{row['attempts']:.0f} ({row['refused']:.0f}) |"
        )
    ratio = off["attacked_ms"] / on["attacked_ms"]
    print(f"\nUnder attack, the API answers {ratio:.1f}× faster with the throttle on.")
    if args.json:
        print(json.dumps({"on": on, "off": off, "attacked_off_over_on": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
