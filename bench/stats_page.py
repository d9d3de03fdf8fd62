"""Benchmark: the statistics page's numbers (`stats_page.experiment_stats`) for a 3 × 2 × 3 × 2
× 5 matrix (workflow × task × model × sharing × seed: 180 succeeded runs, 18 sharing pairs'
cells).

Each run has `--steps` steps: `eval/accuracy` every 10 steps, and `role/<r>/grad_norm` and
`grad_share` for two roles every step (what `summarize_run` and the lead test read); a third
of the shared runs fall off a cliff after gradient amplification. Stored in a fresh
PostgreSQL database (`troupe_bench_stats`, dropped at the end).

- cold: summary and statistics caches cleared, a new connection (after a server restart);
- maths: summaries cached, the statistics cache cleared (bootstrap, permutations, words);
- warm: both cached (a reload of a finished experiment: the summaries' signature query,
  the lead test's grad_norm query and a hash).

    .venv/bin/python bench/stats_page.py            # medians of 5
    .venv/bin/python bench/stats_page.py --json
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
from vocabulary.names import ACCURACY_KEY, GRAD_NORM, GRAD_SHARE, PER_ROLE, SHARED, role_key  # noqa: E402

DATABASE = "troupe_bench_stats"
WORKFLOWS = ("single", "voting", "eval_opt")
TASKS = ("math", "code")
MODELS = ("tiny-s", "tiny-m", "tiny-l")
SHARING = (SHARED, PER_ROLE)
SEEDS = range(5)


def series(index: int, sharing: str, steps: int) -> list[tuple[str, int, float]]:
    """One run's points: a cliff with amplification 30 steps before it for every third
    shared run, a plateau otherwise; small per-run wobble so no two runs are alike."""
    wobble = (index % 7) / 100
    falls = sharing == SHARED and index % 3 == 0
    cliff_at, onset = int(steps * 0.6), int(steps * 0.45)
    points = []
    for s in range(0, steps + 1, 10):
        rise = min(1.0, s / (steps * 0.3))
        accuracy = 0.2 + (0.4 + wobble) * rise
        if falls and s >= cliff_at:
            accuracy = 0.1
        points.append((ACCURACY_KEY, s, accuracy))
    for role in ("a", "b"):
        for s in range(steps):
            grad = 1.0 + 0.01 * ((s * 7 + index) % 5)
            if falls and role == "a" and s >= onset:
                grad *= 6
            points.append((role_key(role, GRAD_NORM), s, grad))
            points.append((role_key(role, GRAD_SHARE), s, 0.5))
    return points


def build(owner, steps: int):
    from trainer.config import make_config
    from webapp.experiments.models import Experiment, Run
    from webapp.metrics import write_points
    from webapp.runs.queueing import new_run

    experiment = Experiment.objects.create(owner=owner, name="stats bench", preset="cpu-demo")
    index = 0
    for workflow in WORKFLOWS:
        for task in TASKS:
            for model in MODELS:
                for sharing in SHARING:
                    for seed in SEEDS:
                        config = make_config(
                            "cpu-demo",
                            workflow=workflow,
                            task=task,
                            model=model,
                            sharing=sharing,
                            seed=seed,
                            steps=steps,
                        )
                        run = new_run(experiment, config)
                        run.status = Run.SUCCEEDED
                        run.save()
                        write_points(run.id, series(index, sharing, steps))
                        index += 1
    return experiment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps a run")
    parser.add_argument("--repeats", type=int, default=5, help="timings each (≥ 3)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="server URL (any database)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    with django_database(args.postgres, DATABASE):
        from django.contrib.auth import get_user_model
        from django.db import connection

        from webapp.experiments.models import MetricPoint
        from webapp.runs.summaries import clear_cache
        from webapp.stats import page as stats_page

        owner = get_user_model().objects.create_user("bench")
        started = time.perf_counter()
        experiment = build(owner, args.steps)
        points = MetricPoint.objects.filter(run__experiment=experiment).count()
        built = time.perf_counter() - started
        log(f"{experiment.runs.count()} runs, {points:,} points built in {built:.1f} s")

        def cold_start() -> None:
            clear_cache()
            stats_page._cache.clear()
            connection.close()

        def call() -> None:
            stats = stats_page.experiment_stats(experiment)
            assert len(stats["sharing"]["cells"]) == 18 and stats["lead"]["n"] > 0

        cold = timed(call, args.repeats, before=cold_start)
        maths = timed(call, args.repeats, before=stats_page._cache.clear)
        warm = timed(call, args.repeats)
        stats = stats_page.experiment_stats(experiment)

    summary = {
        "bench": "stats_page",
        "runs": stats["runs"]["counted"],
        "points": points,
        "steps": args.steps,
        "repeats": args.repeats,
        "cold_s": round(statistics.median(cold), 3),
        "maths_s": round(statistics.median(maths), 3),
        "warm_s": round(statistics.median(warm), 3),
        "lead_runs": stats["lead"]["n"],
        "machine": machine(),
        "load_average": load_average(),
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"Statistics page, {summary['runs']} runs, {points:,} points; medians of {args.repeats}")
    times = (summary["cold_s"], summary["maths_s"], summary["warm_s"])
    print("cold {:.3f} s · maths {:.3f} s · warm {:.3f} s".format(*times))
    print(f"{summary['machine']}; load {summary['load_average']}")


if __name__ == "__main__":
    main()
