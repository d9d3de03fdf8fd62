"""The metric store's statements on any database Django supports: SQLite, the embedded default.

The twins of `webapp/metrics/postgres.py`, same names and signatures, in plain SQL and ORM
calls (`webapp/metrics/dialect.py` picks one). They return the same values; only the speed
differs, and one researcher's machine writes a few runs at a time.
"""

from __future__ import annotations

import json

from django.db import connection, transaction

from webapp.experiments.models import MetricPoint, Run
from webapp.metrics.models import StepTime
from webapp.metrics.tables import (
    POINTS,
    SIGN_JOIN,
    TIME_JOIN,
    json_value,
    key_filter,
    placeholders,
)


def insert_points(run_id: int, keys: list[str], steps: list[int], values: list) -> None:
    with transaction.atomic():
        MetricPoint.objects.bulk_create(
            [
                MetricPoint(run_id=run_id, key=k, step=s, value=v)
                for k, s, v in zip(keys, steps, values, strict=True)
            ],
            batch_size=500,
            update_conflicts=True,
            unique_fields=["run", "key", "step"],
            update_fields=["value"],
        )


def load_new_points(rows: list[tuple[int, str, int, float]]) -> None:
    MetricPoint.objects.bulk_create(
        (MetricPoint(run_id=r, key=k, step=s, value=v) for r, k, s, v in rows),
        batch_size=2000,
    )


def series_rows(run_ids: list[int], keys: list[str] | None) -> list[tuple]:
    where, params = key_filter(keys)
    sql = (
        f"SELECT run_id, key, step, value FROM {POINTS} WHERE run_id IN "
        f"({placeholders(len(run_ids))}){where} ORDER BY run_id, key, step"
    )
    grouped: dict[tuple[int, str], tuple[list, list]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*run_ids, *params])
        for run_id, key, step, value in cursor.fetchall():
            steps, values = grouped.setdefault((run_id, key), ([], []))
            steps.append(step)
            values.append(value)
    return [(run_id, key, steps, values) for (run_id, key), (steps, values) in grouped.items()]


def selected_series(
    run_id: int, keys: list[str], suffixes: tuple[str, ...], prefix: str
) -> dict[str, tuple[list, list]]:
    where = (
        f"run_id = %s AND (key IN ({placeholders(len(keys))}) OR (key LIKE %s AND ("
        + " OR ".join(["key LIKE %s"] * len(suffixes))
        + ")))"
    )
    params = [run_id, *keys, prefix + "%", *("%" + suffix for suffix in suffixes)]
    series: dict[str, tuple[list, list]] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, step, value FROM {POINTS} WHERE {where}", params)
        for key, step, value in cursor.fetchall():
            steps, values = series.setdefault(key, ([], []))
            steps.append(step)
            values.append(value)
    return series


def write_step_times(
    run_id: int, ordered: list[tuple[int, int]], last: int | None
) -> dict[int, int]:
    if last is not None:
        Run.objects.filter(id=run_id, step__lt=last).update(step=last)
    before = dict(
        StepTime.objects.filter(run_id=run_id, step__in=[s for s, _ in ordered]).values_list(
            "step", "timestamp"
        )
    )
    StepTime.objects.bulk_create(
        [StepTime(run_id=run_id, step=s, timestamp=t) for s, t in ordered if s not in before]
    )
    return before


def latest_with_times(run_ids: list[int], keys: list[str] | None = None) -> list[tuple]:
    only = f"AND p.key IN ({placeholders(len(keys))})" if keys is not None else ""
    sql = f"""
        SELECT p.run_id, p.key, p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
        FROM {POINTS} p {TIME_JOIN} {SIGN_JOIN}
        WHERE p.run_id IN ({placeholders(len(run_ids))}) {only}
          AND p.step = (SELECT MAX(q.step) FROM {POINTS} q
                        WHERE q.run_id = p.run_id AND q.key = p.key)
        ORDER BY p.run_id, p.key
    """  # noqa: S608 (table names are ours)
    with connection.cursor() as cursor:
        cursor.execute(sql, list(run_ids) + list(keys or []))
        return cursor.fetchall()


def history_json(
    run_id: int, key: str, start_step: int, limit: int | None
) -> tuple[str, int | None]:
    sql = f"""
        SELECT p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
        FROM {POINTS} p {TIME_JOIN} {SIGN_JOIN}
        WHERE p.run_id = %s AND p.key = %s AND p.step >= %s ORDER BY p.step
    """  # noqa: S608
    params: list = [run_id, key, start_step]
    if limit is not None:  # one more: the first step of the next page, if any
        sql += " LIMIT %s"
        params.append(limit + 1)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    following = None
    if limit is not None and len(rows) > limit:
        following, rows = rows[limit][0], rows[:limit]
    points = [
        {"key": key, "value": json_value(value, sign), "timestamp": timestamp or 0, "step": step}
        for step, value, timestamp, sign in rows
    ]
    return json.dumps(points), following
