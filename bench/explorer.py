"""Benchmark: the runs explorer's first page over 10,000 runs with 200 metric keys each, on the
embedded default (SQLite) and on PostgreSQL, with the query plan of its metric reads.

Each database gets a fresh store (a temporary SQLite file; `troupe_bench_explorer` on the
PostgreSQL server, dropped at the end), filled with `--runs` runs in 20 experiments, each
with `--keys` metric keys of `--steps` points (plus `eval/accuracy`), a learning rate and a
sharing mode in its config, and a tag on every tenth run. Then each query below is timed
in-process, `webapp.explorer.query.explore` for page 1 of 50 rows with the default columns
and the metric the query names, the median of `--repeats` calls:

- `newest`: no filter, newest first — the database sorts run ids (the default view);
- `metric filter`: `params.sharing = 'per_role' and metrics.m007 > 0.4 and tags.note LIKE
  '%lr%'`, sorted by `metrics.m007` — one primary-key seek per candidate run and key;
- `verdicts`: `cliff_status = 'none' and peak > 0.5`, sorted by `peak` — one stored verdict
  row a run (filled once beforehand, timed as `verdicts, first fill`);
- `sort by max`: every run sorted by `metrics.m042@max` — a range read of that one series
  per run.

The plan printed for each database is that of the `metric filter` page query.

    .venv/bin/python bench/explorer.py                       # SQLite and PostgreSQL
    .venv/bin/python bench/explorer.py --smoke --json        # 200 runs × 10 keys, SQLite
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from bench.common import DEFAULT_POSTGRES, load_average, log, machine  # noqa: E402
from vocabulary.names import PER_ROLE, SHARED  # noqa: E402

DATABASE = "troupe_bench_explorer"
QUERIES = {
    "newest": ("", "", ""),
    "metric filter": (
        "params.sharing = 'per_role' and metrics.m007 > 0.4 and tags.note LIKE '%lr%'",
        "metrics.m007 DESC",
        "metrics.m007",
    ),
    "verdicts": ("cliff_status = 'none' and peak > 0.5", "attributes.peak DESC", ""),
    "sort by max": ("", "metrics.m042@max DESC", "metrics.m042@max"),
}


def fill(n_runs: int, n_keys: int, n_steps: int) -> None:
    """Experiments, runs and points, written the fastest way each database takes."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from vocabulary.names import ACCURACY_KEY
    from webapp.experiments.models import Experiment, Run
    from webapp.metrics import load_new_points

    rng = random.Random(7)
    owner = get_user_model().objects.create_user("bench")
    experiments = [Experiment(owner=owner, name=f"sweep {i}") for i in range(20)]
    Experiment.objects.bulk_create(experiments)
    runs = []
    for i in range(n_runs):
        sharing = (SHARED, PER_ROLE)[i % 2]
        runs.append(
            Run(
                experiment=experiments[i % 20],
                name=f"run {i}",
                status=Run.SUCCEEDED,
                sharing=sharing,
                workflow="voting",
                seed=i % 5,
                step=n_steps,
                total_steps=n_steps,
                config={"lr": (1e-5, 3e-5, 1e-4)[i % 3], "sharing": sharing, "seed": i % 5},
            )
        )
    Run.objects.bulk_create(runs, batch_size=2000)
    ids = list(Run.objects.order_by("id").values_list("id", flat=True))
    tag_runs(ids[1::10])  # odd runs are per_role: the metric filter finds some
    keys = [f"m{k:03d}" for k in range(n_keys)] + [ACCURACY_KEY]
    with transaction.atomic():
        for start in range(0, len(ids), 200):
            rows = [
                (run_id, key, step, rng.random())
                for run_id in ids[start : start + 200]
                for key in keys
                for step in range(n_steps)
            ]
            if connection.vendor == "postgresql":
                load_new_points(rows)
            else:  # the portable loader goes through the ORM: 10x slower to fill
                with connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO experiments_metricpoint (run_id, key, step, value) "
                        "VALUES (%s, %s, %s, %s)",
                        rows,
                    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def tag_runs(ids: list[int]) -> None:
    from webapp.explorer.models import RunTags

    RunTags.objects.bulk_create(
        [RunTags(run_id=i, tags={"note": "try a lower lr"}) for i in ids], batch_size=2000
    )


def measure(args) -> dict:
    from webapp.experiments.models import Run
    from webapp.explorer.fields import DEFAULT_COLUMNS, parse_columns, parse_sort
    from webapp.explorer.query import explore
    from webapp.explorer.verdicts import verdicts

    started = time.perf_counter()
    fill(args.runs, args.keys, args.steps)
    filled = time.perf_counter() - started
    log(f"  filled in {filled:.0f} s")
    ids = list(Run.objects.values_list("id", flat=True))
    started = time.perf_counter()
    verdicts(
        Run.objects.filter(id__in=ids).values("id", "status", "step", "total_steps", "sharing")
    )
    out = {"fill_s": round(filled, 1), "verdicts, first fill": time.perf_counter() - started}
    for name, (q, sort, extra) in QUERIES.items():
        columns = parse_columns([*DEFAULT_COLUMNS, *([extra] if extra else [])])
        times, total = [], 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            table = explore(q, columns, parse_sort(sort))
            times.append(time.perf_counter() - t0)
            total = table.total
        out[name] = statistics.median(times)
        out[f"{name} (matches)"] = total
        log(f"  {name}: {out[name] * 1000:.0f} ms, {total} matches")
    out["plan"] = page_plan(*QUERIES["metric filter"][:2])
    return out


def page_plan(text: str, sort: str) -> str:
    """The database's plan of the page query `explore` sends for `text` and `sort`."""
    from webapp.experiments.models import Run
    from webapp.explorer.conditions import narrow, ordering
    from webapp.explorer.fields import parse_filter, parse_sort
    from webapp.runs.lifecycle import live_runs

    runs, rest = narrow(live_runs(Run.objects.all()), parse_filter(text))
    assert not rest, "the bench's query is one the database answers alone"
    runs, order = ordering(runs, *parse_sort(sort))
    return runs.order_by(*order).values_list("id", flat=True)[:50].explain()


def one(database: str, args) -> dict:
    """Set Django up on `database` in this process (a child of main) and measure."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if database == "postgres":
        from bench.common import django_database

        with django_database(args.postgres, DATABASE):
            return measure(args)
    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["TROUPE_DATA_DIR"] = data_dir
        os.environ.pop("DATABASE_URL", None)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        return measure(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--smoke", action="store_true", help="200 runs × 10 keys, SQLite")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's database
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.keys, args.repeats = 200, 10, 2
        args.databases = "sqlite"
    if args.one:
        print(json.dumps(one(args.one, args)))
        return
    results = {}
    for database in args.databases.split(","):
        log(f"{database}: {args.runs} runs × {args.keys} keys × {args.steps} steps")
        child = [sys.executable, __file__, "--one", database, *sys.argv[1:]]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        sys.stderr.write(done.stderr)
        if done.returncode:
            raise SystemExit(f"{database}: the bench failed")
        results[database] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(results))
        return
    print(f"machine: {machine()}; load average {load_average()}")
    print(f"{args.runs} runs × {args.keys} keys × {args.steps} steps; page 1 of 50 rows")
    names = [*QUERIES, "verdicts, first fill"]
    print("| query | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for name in names:
        print(
            f"| {name} | " + " | ".join(f"{r[name] * 1000:.0f} ms" for r in results.values()) + " |"
        )
    for database, r in results.items():
        print(f"\n{database} plan of the metric filter page query:\n{r['plan']}")


if __name__ == "__main__":
    main()
