"""Writing metric points: batched, and idempotent on (run, key, step).

Both writers of points — the metrics API and the workers' database reporter — go through
`write_points`, so a retried or replayed batch overwrites the points it already wrote instead
of adding new ones. On PostgreSQL the whole batch is one `INSERT … SELECT FROM unnest(…) ON
CONFLICT DO UPDATE` (one statement, three array parameters: about six times faster than
`bulk_create` with `update_conflicts`, see BENCHMARKS.md); other databases use
`bulk_create(update_conflicts=True)`.

Every batch is written in one order, sorted by (key, step): two writers of one run whose
batches overlap then lock the rows they share in the same order, so one waits for the other
instead of each holding a row the other needs (PostgreSQL's `deadlock detected`, which
aborted concurrent API writes sent in different orders). A plain function scan over the
arrays feeds the insert in array order.

On PostgreSQL a batch is first tried as a plain `INSERT` inside a savepoint: new points (the
common case: a step is logged once) skip the speculative insertion of `ON CONFLICT`, a third
of the statement's time on a 1,600-point batch (BENCHMARKS.md, issue 12). A batch holding a
point already stored fails at that point with a unique violation, rolls back to the savepoint
and is written again by the upsert, so replays still overwrite.

After a batch is stored, `write_points` hands its keys to the live radar
(`webapp.experiments.alerts.after_points`), which re-evaluates the run's alerts only when the
batch touched a key it reads, and never fails the write.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import psycopg
from django.db import connection, transaction

from webapp.experiments.alerts import after_points
from webapp.experiments.models import MetricPoint

Point = tuple[str, int, float | None]  # (key, step, value)

_INSERT = """
INSERT INTO {table} (run_id, key, step, value)
SELECT %b, k, s, v FROM unnest(%b::varchar[], %b::integer[], %b::double precision[]) AS p(k, s, v)
"""
_UPSERT = (
    _INSERT
    + """ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value
WHERE {table}.value IS DISTINCT FROM EXCLUDED.value
"""
)


def finite_or_none(value: float | None) -> float | None:
    """NaN and ±inf are stored as NULL: JSON cannot carry them and readers treat NULL as a gap."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def write_points(run_id: int, points: Iterable[Point], *, radar: bool = True) -> int:
    """Store points of one run, overwriting any already stored at the same (key, step).

    Returns how many distinct (key, step) pairs the batch held. A pair given twice in one
    batch keeps its last value (Postgres refuses to update one row twice in a statement).
    The signature is what every writer calls (the API, the workers' reporter): keep it.
    `radar=False` skips the live radar (a bulk import that calls `refresh_alerts` once).
    """
    latest = {(key, step): value for key, step, value in points}
    if not latest:
        return 0
    # One lock order for every writer (see the module docstring). The pairs are unique, so
    # the sort never compares two values.
    order = sorted(latest.items())
    values = [value for _, value in order]
    if not all(type(value) is float for value in values) or not all(map(math.isfinite, values)):
        values = [finite_or_none(value) for value in values]
    if connection.vendor == "postgresql":
        keys = [key for (key, _), _ in order]
        steps = [step for (_, step), _ in order]
        _insert_or_upsert([run_id, keys, steps, values])
    else:
        with transaction.atomic():
            MetricPoint.objects.bulk_create(
                [
                    MetricPoint(run_id=run_id, key=k, step=s, value=v)
                    for ((k, s), _), v in zip(order, values, strict=True)
                ],
                batch_size=500,
                update_conflicts=True,
                unique_fields=["run", "key", "step"],
                update_fields=["value"],
            )
    if radar:
        after_points(run_id, {key for key, _ in latest})
    return len(latest)


def _insert_or_upsert(params: list) -> None:
    """The batch as a plain INSERT in a savepoint, or, when a point of it is already stored,
    as the upsert. A plain psycopg cursor on Django's connection (and transaction): it binds
    the three arrays in binary, where Django's client-side cursor would quote 1,000 strings."""
    table = MetricPoint._meta.db_table
    connection.ensure_connection()
    # Inside the caller's transaction the inner atomic is a savepoint; outside any, it is a
    # transaction of its own and the upsert then runs in autocommit: atomic either way.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        try:
            with transaction.atomic():
                cursor.execute(_INSERT.format(table=table), params)
            return
        except psycopg.errors.UniqueViolation:
            pass  # a point of the batch is stored already: overwrite, as a replay should
        cursor.execute(_UPSERT.format(table=table), params)
