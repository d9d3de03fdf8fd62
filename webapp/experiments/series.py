"""Reading metric series for the API, the run page and the Dash panel, downsampled on the server.

`read_series` fetches every requested key of a run in one query, in (key, step) order, the
order of the table's primary key; each series is then reduced by `trainer.analysis.downsample`,
which keeps the first and last points and each bucket's minimum and maximum, so peaks and
cliffs survive downsampling. `latest_points` gives the newest value of every key (the run
page's table).
"""

from __future__ import annotations

from django.db import connection

from trainer.analysis import downsample
from webapp.experiments.models import MetricPoint

TABLE = MetricPoint._meta.db_table


def run_keys(run_id: int) -> list[str]:
    return sorted(
        MetricPoint.objects.filter(run_id=run_id).values_list("key", flat=True).distinct()
    )


def read_series(
    run_id: int, keys: list[str] | None = None, max_points: int = 0
) -> dict[str, dict[str, list]]:
    """{key: {"steps": [...], "values": [...]}}; all keys when `keys` is None; every point
    when `max_points` is 0. Keys with no points are left out."""
    if max_points < 0:
        raise ValueError(f"max_points must be 0 (everything) or positive, not {max_points}")
    sql = f"SELECT key, step, value FROM {TABLE} WHERE run_id = %s"
    params: list = [run_id]
    if keys is not None:
        if not keys:
            return {}
        sql += f" AND key IN ({', '.join(['%s'] * len(keys))})"
        params += list(keys)
    sql += " ORDER BY key, step"
    grouped: dict[str, tuple[list, list]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for key, step, value in rows:
        steps, values = grouped.setdefault(key, ([], []))
        steps.append(step)
        values.append(value)
    return {key: downsample(steps, values, max_points) for key, (steps, values) in grouped.items()}


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
