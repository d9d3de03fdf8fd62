"""Benchmark: the Dash matrix view's callback for experiments of 10, 100 and 1,000 runs.

`webapp.dashboards.pages.matrix.update_matrix` is what the matrix page runs on every load and
every live refresh: query (the runs, then `cell_summaries` — one aggregate query for the
summary cache's signatures and one query for the `eval/accuracy` points of runs not cached)
→ analysis (`analysis.runs.summarize_run` per run, `summarize_cells`) → figure (one heatmap
per sharing mode) and table. It is timed here in-process on a fresh PostgreSQL database
(`troupe_bench_matrix`, dropped at the end) holding demo experiments built by
`webapp/demo/build.py`: 24 cells (3 workflows × 2 tasks × 2 models × 2 sharing modes)
and as many seeds as the size needs, `--steps` 200 steps a run, about 2,600 points a run over
16 keys (accuracy every 10 steps; training, per-role and pairwise series every step).

- cold: summary cache cleared and a new database connection, as after a server restart;
- warm: the same call again (every run cached: what a live refresh of a finished experiment
  costs), and `figure`: `figures.matrix_figure` alone on the cells.

Each is repeated `--repeats` (≥ 5) times; the table shows medians.

    .venv/bin/python bench/matrix_view.py                 # sizes 10,100,1000
    .venv/bin/python bench/matrix_view.py --smoke --json  # sizes 2,4 on 60 steps; seconds
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from bench.common import (  # noqa: E402 - after the path fix
    DEFAULT_POSTGRES,
    django_database,
    load_average,
    log,
    machine,
    timed,
)

DATABASE = "troupe_bench_matrix"


def measure(n: int, owner, args) -> dict:
    from django.db import connection

    from webapp.dashboards import figures
    from webapp.dashboards.data import viewing_as
    from webapp.dashboards.pages.matrix import update_matrix
    from webapp.demo.build import build_demo_experiment
    from webapp.experiments.models import MetricPoint
    from webapp.runs.summaries import cell_summaries, clear_cache

    started = time.perf_counter()
    experiment = build_demo_experiment(owner, runs=n, steps=args.steps).experiment
    built_s = time.perf_counter() - started
    points = MetricPoint.objects.filter(run__experiment=experiment).count()
    log(f"{n} runs: {points:,} points built in {built_s:.1f} s")

    def cold_start() -> None:
        clear_cache()
        connection.close()  # a new request may get a new connection: count its set-up

    def view() -> None:
        figure, table, _, _ = update_matrix(experiment.id, "gain", 0)
        assert len(figure.data) == 2 and table is not None

    with viewing_as(owner):
        cold = timed(view, args.repeats, before=cold_start)
        warm = timed(view, args.repeats)
        cells = cell_summaries(experiment, gradients=False)
        figure = timed(lambda: figures.matrix_figure(cells, "gain"), args.repeats)
    return {
        "runs": n,
        "points": points,
        "cells": len(cells),
        "cold_s": round(statistics.median(cold), 4),
        "warm_s": round(statistics.median(warm), 4),
        "figure_s": round(statistics.median(figure), 4),
        "cold_ms_per_run": round(1e3 * statistics.median(cold) / n, 3),
        "cold_s_all": [round(t, 4) for t in cold],
        "warm_s_all": [round(t, 4) for t in warm],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="comma-separated run counts")
    parser.add_argument("--steps", type=int, default=200, help="training steps a run")
    parser.add_argument("--repeats", type=int, default=5, help="timings a size (≥ 5)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--smoke", action="store_true", help="sizes 2,4 on 60 steps")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error("--repeats must be at least 5 (the table reports medians)")
    sizes = [2, 4] if args.smoke else [int(s) for s in args.sizes.split(",")]
    if args.smoke:
        args.steps = 60

    with django_database(args.postgres, DATABASE):
        from django.contrib.auth import get_user_model

        owner = get_user_model().objects.create_user("bench")
        rows = [measure(n, owner, args) for n in sizes]

    summary = {
        "bench": "matrix_view",
        "smoke": args.smoke,
        "steps": args.steps,
        "repeats": args.repeats,
        "machine": machine(),
        "load_average": load_average(),
        "sizes": rows,
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"Matrix view (update_matrix), medians of {args.repeats}; {summary['machine']}")
    print(f"{'runs':>6} {'points':>11} {'cells':>5} {'cold s':>8} {'warm s':>8} {'figure s':>9}")
    for row in rows:
        print(
            f"{row['runs']:>6} {row['points']:>11,} {row['cells']:>5} {row['cold_s']:>8.3f} "
            f"{row['warm_s']:>8.3f} {row['figure_s']:>9.3f}"
        )


if __name__ == "__main__":
    main()
