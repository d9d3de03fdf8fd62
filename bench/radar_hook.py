"""Benchmark: what one live-radar evaluation costs beside a metric write (alerts.py).

In one process on a fresh PostgreSQL database (`troupe_bench_radar_hook`, dropped at the
end): a run already holding `--steps` 1,000 steps of 40 keys (eval/accuracy every 10 steps
with a cliff, 4 roles × grad_norm, grad_share, entropy and 4 more, 12 train/sys keys), then
`--calls` batches of the next steps (one step's 40 points each, as a worker's reporter sends
them) written with `write_points` alternately followed by an evaluation (what the radar's
task does, here every batch: the worst case) and alone. The evaluation now runs
in the radar's worker, not in the write path. Also the evaluation alone
(`refresh_alerts`: one query, the radar, the upsert), and its read (`radar_series`) and the
radar on its own. Medians in milliseconds.

    .venv/bin/python bench/radar_hook.py            # --steps 1000 --calls 40
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import DEFAULT_POSTGRES, drop_database, recreate_database  # noqa: E402
from vocabulary.names import (  # noqa: E402
    ACCURACY_KEY,
    ENTROPY,
    GRAD_NORM,
    GRAD_SHARE,
    KL,
    PG_LOSS,
    RESP_LEN,
    SHARED,
    TOKENS,
    ZERO_STD_KEY,
    role_key,
)

DATABASE = "troupe_bench_radar_hook"
ROLES = ("generator", "aggregator", "evaluator", "worker")
ROLE_KEYS = (GRAD_NORM, GRAD_SHARE, ENTROPY, KL, TOKENS, RESP_LEN, PG_LOSS)
OTHER_KEYS = [f"train/k{i}" for i in range(7)] + [f"sys/k{i}" for i in range(4)]


def step_points(step: int, total: int) -> list[tuple[str, int, float]]:
    """One step of the synthetic run: 40 keys (39 every step, eval/accuracy every 10th)."""
    points = []
    for r, role in enumerate(ROLES):
        for key in ROLE_KEYS:
            value = 1.0 + 0.1 * math.sin(step / 7 + r) + (2.0 if step > 0.6 * total else 0.0)
            points.append((role_key(role, key), step, value))
    points += [(key, step, 0.5 + 0.01 * math.cos(step)) for key in OTHER_KEYS]
    points.append((ZERO_STD_KEY, step, 0.2))
    if step % 10 == 0:
        accuracy = 0.2 + 0.5 * min(step / (0.5 * total), 1.0)
        points.append((ACCURACY_KEY, step, accuracy if step < 0.8 * total else 0.2))
    return points


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = recreate_database(args.postgres, DATABASE)
    os.environ["TROUPE_RADAR_MIN_SECONDS"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from analysis.radar import radar
    from webapp.alerts.radar import radar_series, refresh_alerts
    from webapp.experiments.models import Alert, Experiment, Run
    from webapp.metrics import write_points

    try:
        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench")
        experiment = Experiment.objects.create(owner=user, name="bench")
        run = Run.objects.create(
            experiment=experiment, status=Run.RUNNING, total_steps=args.steps, sharing=SHARED
        )
        total = args.steps
        batch = []
        for step in range(args.steps):
            batch += step_points(step, total)
            if len(batch) >= 4000:
                write_points(run.id, batch)
                batch = []
        write_points(run.id, batch)

        with_radar, without, hook, read, judge = [], [], [], [], []
        step = args.steps
        for i in range(args.calls):
            points = step_points(step, total)
            t0 = time.perf_counter()
            write_points(run.id, points)
            if i % 2 == 0:
                refresh_alerts(run)  # what the radar's evaluation does after a batch
            (with_radar if i % 2 == 0 else without).append(time.perf_counter() - t0)
            step += 1
        for _ in range(args.calls // 2):
            t0 = time.perf_counter()
            refresh_alerts(run)
            hook.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            series = radar_series(run.id)
            read.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            radar(series, running=True, sharing=SHARED, total_steps=total)
            judge.append(time.perf_counter() - t0)
        events = sorted(Alert.objects.filter(run=run).values_list("kind", flat=True))
        connection.close()
    finally:
        drop_database(args.postgres, DATABASE)

    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}",
        "run": f"{args.steps} steps, {len(step_points(0, total))} keys",
        "write_points, radar on (ms)": round(1000 * statistics.median(with_radar), 2),
        "write_points, radar off (ms)": round(1000 * statistics.median(without), 2),
        "refresh_alerts alone (ms)": round(1000 * statistics.median(hook), 2),
        "of which radar_series (ms)": round(1000 * statistics.median(read), 2),
        "of which radar (ms)": round(1000 * statistics.median(judge), 2),
        "events": events,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
