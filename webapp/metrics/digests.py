"""One number per run from a metric's series, for tables over many runs: its last value (the
value MLflow's search compares: the point at the highest step), its minimum or its maximum.

Each is a seek into the points' primary key (run, key, step), never a scan of the table: the
last value is the index's last entry under (run, key), read backwards and stopped at one row;
the minimum and maximum read that one series' entries (its steps), nothing of other keys.
`plan()` returns the database's plan of the last-value read, so a benchmark can show it.
`last_value` and `folded_value` are the same reads as expressions of a Run
query, for a filter or a sort the database evaluates itself, a page at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.db import connection
from django.db.models import FloatField, OuterRef, Subquery

from webapp.experiments.models import MetricPoint
from webapp.metrics.tables import POINTS, RUNS, placeholders

_CHUNK = 500  # run ids per IN (...) list: well under every backend's parameter limit
AGGREGATES = ("last", "min", "max")

_LAST = f"""
    SELECT r.id, (SELECT p.value FROM {POINTS} p WHERE p.run_id = r.id AND p.key = %s
                  ORDER BY p.step DESC LIMIT 1),
           EXISTS (SELECT 1 FROM {POINTS} p WHERE p.run_id = r.id AND p.key = %s)
    FROM {RUNS} r WHERE r.id IN ({{ids}})
"""
_FOLD = f"""
    SELECT run_id, {{fold}}(value) FROM {POINTS}
    WHERE key = %s AND run_id IN ({{ids}}) GROUP BY run_id
"""


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    ids = list(ids)
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def digest(run_ids: Sequence[int], key: str, aggregate: str = "last") -> dict[int, float | None]:
    """`{run_id: value}` of the runs that logged `key`; None where the value is a gap (NaN or
    ±inf, stored as NULL) or, for min/max, where every point is one."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, not {aggregate!r}")
    found: dict[int, float | None] = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(run_ids):
            ids = placeholders(len(chunk))
            if aggregate == "last":
                cursor.execute(_LAST.format(ids=ids), [key, key, *chunk])
                found.update((run, value) for run, value, has in cursor.fetchall() if has)
            else:
                cursor.execute(_FOLD.format(fold=aggregate.upper(), ids=ids), [key, *chunk])
                found.update(cursor.fetchall())
    return found


def plan(run_ids: Sequence[int], key: str) -> str:
    """The database's query plan of `digest(run_ids, key)` (its first chunk), as text."""
    chunk = next(_chunks(run_ids), [0])
    explain = "EXPLAIN QUERY PLAN" if connection.vendor == "sqlite" else "EXPLAIN"
    with connection.cursor() as cursor:
        cursor.execute(
            f"{explain} {_LAST.format(ids=placeholders(len(chunk)))}", [key, key, *chunk]
        )
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


# --- the same numbers as expressions of a Run query (the explorer's filters and sorts) -------


def last_value(key: str, run: str = "pk") -> Subquery:
    """The run's last value of `key`, as a column of a Run query: one backward seek a run."""
    points = MetricPoint.objects.filter(run_id=OuterRef(run), key=key).order_by("-step")
    return Subquery(points.values("value")[:1], output_field=FloatField())


def folded_value(key: str, aggregate: str, run: str = "pk") -> Subquery:
    """The run's min or max of `key`, as a column of a Run query: that one series read in
    value order, stopped at the first row (no GROUP BY: SQLite would build a temporary
    table for each run's)."""
    order = "-value" if aggregate == "max" else "value"
    points = MetricPoint.objects.filter(run_id=OuterRef(run), key=key, value__isnull=False)
    return Subquery(points.order_by(order).values("value")[:1], output_field=FloatField())
