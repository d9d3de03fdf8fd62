"""Reading metric series for the API and the Dash panel, downsampled on the server.

One query fetches every requested key of a run in (key, step) order; each series is then
reduced by `trainer.analysis.downsample`, which keeps the first and last points and each
bucket's minimum and maximum, so peaks and cliffs survive downsampling.
"""

from __future__ import annotations

from django.db import connection

from trainer.analysis import downsample
from webapp.experiments.models import MetricPoint


def run_keys(run_id: int) -> list[str]:
    return sorted(
        MetricPoint.objects.filter(run_id=run_id).values_list("key", flat=True).distinct()
    )


def read_series(
    run_id: int, keys: list[str] | None = None, max_points: int = 0
) -> dict[str, dict[str, list]]:
    """{key: {"steps": [...], "values": [...]}}; all keys when `keys` is None."""
    table = MetricPoint._meta.db_table
    sql = f"SELECT key, step, value FROM {table} WHERE run_id = %s"
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
        for key, step, value in cursor.fetchall():
            steps, values = grouped.setdefault(key, ([], []))
            steps.append(step)
            values.append(value)
    return {key: downsample(steps, values, max_points) for key, (steps, values) in grouped.items()}
