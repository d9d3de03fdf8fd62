"""Reading metric series for the API, the run page and the Dash panel, downsampled on the server.

`read_series` fetches every requested key of a run in one query (on PostgreSQL one row a key,
its steps and values aggregated into arrays and sent in binary), and `read_runs_series` the
same keys of many runs in one query (a compare view); each series is then reduced,
as numpy arrays, by `analysis.downsample.downsample`, which keeps the first and last points and
each bucket's minimum and maximum, so peaks and cliffs survive downsampling. `latest_points`
gives the newest value of every key (the run page's table).
"""

from __future__ import annotations

import numpy as np
import psycopg
from django.db import connection

from analysis.downsample import downsample
from webapp.experiments.models import MetricPoint

TABLE = MetricPoint._meta.db_table


def read_series(
    run_id: int, keys: list[str] | None = None, max_points: int = 0
) -> dict[str, dict[str, list]]:
    """{key: {"steps": [...], "values": [...]}}; all keys when `keys` is None; every point
    when `max_points` is 0. Keys with no points are left out."""
    return read_runs_series([run_id], keys, max_points)[run_id]


def read_runs_series(
    run_ids: list[int], keys: list[str] | None = None, max_points: int = 0
) -> dict[int, dict[str, dict[str, list]]]:
    """`read_series` of every run in `run_ids`, in one query: {run_id: {key: series}}, with
    an entry (perhaps empty) for each run asked for."""
    if max_points < 0:
        raise ValueError(f"max_points must be 0 (everything) or positive, not {max_points}")
    out: dict[int, dict[str, dict[str, list]]] = {run_id: {} for run_id in run_ids}
    if not run_ids or (keys is not None and not keys):
        return out
    read = _read_postgres if connection.vendor == "postgresql" else _read
    for run_id, key, steps, values in read(list(out), keys):
        out[run_id][key] = downsample(
            np.array(steps, dtype=np.int64), np.array(values, dtype=float), max_points
        )
    return out


def _key_filter(keys: list[str] | None) -> tuple[str, list]:
    if keys is None:
        return "", []
    return f" AND key IN ({', '.join(['%s'] * len(keys))})", list(keys)


def _read_postgres(run_ids: list[int], keys: list[str] | None) -> list[tuple]:
    """One row a (run, key) with its steps and values as arrays, in binary: a twentieth of
    the rows and none of the text parsing of one row a point. No ORDER BY: `downsample`
    sorts, so the server needs no sort either (and never spills one to disk when statistics
    are stale)."""
    where, params = _key_filter(keys)
    sql = (
        f"SELECT run_id, key, array_agg(step), array_agg(value) FROM {TABLE}"
        f" WHERE run_id = ANY(%s){where} GROUP BY run_id, key"
    )
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, [run_ids, *params], binary=True)
        return sorted(cursor.fetchall())


def _read(run_ids: list[int], keys: list[str] | None) -> list[tuple]:
    where, params = _key_filter(keys)
    runs = ", ".join(["%s"] * len(run_ids))
    sql = (
        f"SELECT run_id, key, step, value FROM {TABLE} WHERE run_id IN ({runs}){where}"
        " ORDER BY run_id, key, step"
    )
    grouped: dict[tuple[int, str], tuple[list, list]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*run_ids, *params])
        for run_id, key, step, value in cursor.fetchall():
            steps, values = grouped.setdefault((run_id, key), ([], []))
            steps.append(step)
            values.append(value)
    return [(run_id, key, steps, values) for (run_id, key), (steps, values) in grouped.items()]


def latest_points(run_id: int) -> dict[str, dict]:
    """{key: {"step", "value"}} for the newest step of every key of the run."""
    sql = (
        f"SELECT m.key, m.step, m.value FROM {TABLE} m JOIN ("
        f"SELECT key, MAX(step) AS step FROM {TABLE} WHERE run_id = %s GROUP BY key"
        ") newest ON m.key = newest.key AND m.step = newest.step WHERE m.run_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, run_id])
        rows = cursor.fetchall()
    return {key: {"step": step, "value": value} for key, step, value in sorted(rows)}
