"""The metric store: every read and write of metric points, step times and the keys of a run.

Callers never write SQL on these tables; the statements whose fastest form differs between
databases come from `dialect.sql()` (`postgres.py` or `portable.py`), the rest are here.

Writes are idempotent on (run, key, step): a retried or replayed batch overwrites the points
it already wrote instead of adding new ones. Every batch is written in one order, sorted by
(key, step): two writers of one run whose batches overlap then lock the rows they share in
the same order, so one waits for the other instead of each holding a row the other needs
(PostgreSQL's `deadlock detected`, which aborted concurrent API writes sent in different
orders). The store stores; writers call `webapp.alerts.points.record_points`, which writes
here and then tells what reacts to new points (the live radar).

Reads of series are whole (`max_points=0`) or downsampled by `analysis.downsample`,
which keeps the first and last points, each bucket's minimum and maximum and its first gap
(a NaN or ±inf, stored as NULL, read as None), so peaks, cliffs and divergences survive
downsampling. Many runs are read in one query.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Sequence

import numpy as np
from django.db import connection
from django.db.models import Q

from analysis.downsample import downsample
from webapp.experiments.models import MetricPoint
from webapp.metrics.dialect import sql
from webapp.metrics.models import PointSign, PointTime
from webapp.metrics.tables import POINTS, json_value, placeholders

Point = tuple[str, int, float | None]  # (key, step, value)
Series = tuple[list[int], list[float | None]]  # (steps, values), every point
_CHUNK = 500  # run ids per IN (...) list: well under every backend's parameter limit


# --- writing points ------------------------------------------------------------------------------


def finite_or_none(value: float | None) -> float | None:
    """NaN and ±inf are stored as NULL: JSON cannot carry them and readers treat NULL as a gap."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def write_points(run_id: int, points: Iterable[Point]) -> int:
    """Store points of one run, overwriting any already stored at the same (key, step).

    Returns how many distinct (key, step) pairs the batch held. A pair given twice in one
    batch keeps its last value (PostgreSQL refuses to update one row twice in a statement).
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
    keys = [key for (key, _), _ in order]
    steps = [step for (_, step), _ in order]
    sql().insert_points(run_id, keys, steps, values)
    return len(latest)


def load_new_points(rows: list[tuple[int, str, int, float]]) -> None:
    """(run_id, key, step, value) rows none of which is stored yet (a generated demo), fast."""
    sql().load_new_points(rows)


def delete_points_from(run_id: int, step: int) -> None:
    """Forget the run's points from `step` on (a resumed run logs them again)."""
    MetricPoint.objects.filter(run_id=run_id, step__gte=step).delete()


def delete_series(run_id: int, keys: Sequence[str]) -> None:
    """Forget every point of these keys of the run (an alias the client now logs itself)."""
    MetricPoint.objects.filter(run_id=run_id, key__in=list(keys)).delete()


# --- reading points ------------------------------------------------------------------------------


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
    for run_id, key, steps, values in sql().series_rows(list(out), keys):
        out[run_id][key] = downsample(
            np.array(steps, dtype=np.int64), np.array(values, dtype=float), max_points
        )
    return out


def selected_series(
    run_id: int, keys: Sequence[str], *, prefix: str, suffixes: Sequence[str]
) -> dict[str, Series]:
    """{key: (steps, values)} of the run's keys that are in `keys` or start with `prefix` and
    end with one of `suffixes` (the live radar's series), unordered: in one query."""
    return sql().selected_series(run_id, list(keys), tuple(suffixes), prefix)


def latest_points(run_id: int) -> dict[str, dict]:
    """{key: {"step", "value"}} for the newest step of every key of the run."""
    query = (
        f"SELECT m.key, m.step, m.value FROM {POINTS} m JOIN ("
        f"SELECT key, MAX(step) AS step FROM {POINTS} WHERE run_id = %s GROUP BY key"
        ") newest ON m.key = newest.key AND m.step = newest.step WHERE m.run_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(query, [run_id, run_id])
        rows = cursor.fetchall()
    return {key: {"step": step, "value": value} for key, step, value in sorted(rows)}


def latest_values(run_id: int, keys: Sequence[str]) -> dict[str, float | None]:
    """{key: value at its newest step} of those of `keys` the run logged."""
    latest: dict[str, float | None] = {}
    rows = (
        MetricPoint.objects.filter(run_id=run_id, key__in=list(keys))
        .order_by("key", "-step")
        .values_list("key", "value")
    )
    for key, value in rows:
        latest.setdefault(key, value)
    return latest


def stored_keys(run_id: int, keys: Sequence[str]) -> set[str]:
    """Those of `keys` the run has points of."""
    if not keys:
        return set()
    found = MetricPoint.objects.filter(run_id=run_id, key__in=list(keys)).values_list("key")
    return {key for (key,) in found.distinct()}


def values_at(run_id: int, key: str, steps: Iterable[int]) -> dict[int, float | None]:
    """{step: value} of one series at the given steps (those it has)."""
    return dict(
        MetricPoint.objects.filter(run_id=run_id, key=key, step__in=set(steps)).values_list(
            "step", "value"
        )
    )


def series_of(wanted: dict[int, str]) -> dict[int, dict[str, Series]]:
    """{run_id: {key: (steps, values)}} of one whole series a run, in step order, one query."""
    series: dict[int, dict[str, Series]] = {run_id: {} for run_id in wanted}
    if not wanted:
        return series
    match = Q()
    for run_id, key in wanted.items():
        match |= Q(run_id=run_id, key=key)
    rows = MetricPoint.objects.filter(match).order_by("run_id", "step")
    for run_id, key, step, value in rows.values_list("run_id", "key", "step", "value"):
        steps, values = series[run_id].setdefault(key, ([], []))
        steps.append(step)
        values.append(value)
    return series


def metric_keys(run_ids: Sequence[int]) -> dict[int, list[str]]:
    """`{run_id: sorted keys}`. A loose index scan: one index probe per distinct key (the
    primary key leads with (run, key)), instead of reading every point of every run as
    SELECT DISTINCT would — 10 keys of a 100,000-point run cost 11 probes, not 100,000 rows."""
    query = f"""
        WITH RECURSIVE k(key) AS (
            SELECT MIN(key) FROM {POINTS} WHERE run_id = %s
            UNION ALL
            SELECT (SELECT MIN(key) FROM {POINTS} WHERE run_id = %s AND key > k.key)
            FROM k WHERE k.key IS NOT NULL
        )
        SELECT key FROM k WHERE key IS NOT NULL
    """
    out: dict[int, list[str]] = {}
    with connection.cursor() as cursor:
        for run_id in run_ids:
            cursor.execute(query, [run_id, run_id])
            out[run_id] = sorted(row[0] for row in cursor.fetchall())
    return out


# --- many runs' chosen series (summaries) --------------------------------------------------------


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _keys_where(keys: Sequence[str], patterns: Sequence[str]) -> tuple[str, list[str]]:
    """`(key = %s OR … OR key LIKE %s …)` and its parameters."""
    clauses = ["key = %s"] * len(keys) + ["key LIKE %s"] * len(patterns)
    return f"({' OR '.join(clauses)})", [*keys, *patterns]


def signatures(
    run_ids: list[int], keys: Sequence[str], patterns: Sequence[str] = ()
) -> dict[int, tuple]:
    """Per run, (count, last step, sum of values) of its points whose key is in `keys` or
    matches a LIKE pattern: cheap (an aggregate over the (run, key, step) index) and changed
    by any new or rewritten point. Runs with none are left out."""
    where, key_params = _keys_where(keys, patterns)
    found: dict[int, tuple] = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(run_ids):
            cursor.execute(
                f"SELECT run_id, COUNT(*), MAX(step), SUM(value) FROM {POINTS} "
                f"WHERE run_id IN ({placeholders(len(chunk))}) AND {where} GROUP BY run_id",
                [*chunk, *key_params],
            )
            for run_id, count, last, total in cursor.fetchall():
                found[run_id] = (count, last, None if total is None else float(total))
    return found


def matching_series(
    run_ids: list[int], keys: Sequence[str], patterns: Sequence[str] = ()
) -> dict[int, dict[str, Series]]:
    """`{run_id: {key: (steps, values)}}` of the keys `signatures` counts: every point, in
    step order, one query a chunk of runs."""
    where, key_params = _keys_where(keys, patterns)
    series: dict[int, dict[str, Series]] = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(run_ids):
            cursor.execute(
                f"SELECT run_id, key, step, value FROM {POINTS} "
                f"WHERE run_id IN ({placeholders(len(chunk))}) AND {where} "
                "ORDER BY run_id, key, step",
                [*chunk, *key_params],
            )
            for run_id, key, step, value in cursor.fetchall():
                steps, values = series.setdefault(run_id, {}).setdefault(key, ([], []))
                steps.append(step)
                values.append(value)
    return series


# --- MLflow's times, signs and reads -------------------------------------------------------------


def write_step_times(run_id: int, times: dict[int, int], last: int | None) -> dict[int, int]:
    """Each new step's time, in step order (one lock order for every writer), and the run's
    step moved on to `last` (None: left as it is); {step: time} of the steps already timed.
    A step's time is its first point's; later points at other times get their own rows."""
    return sql().write_step_times(run_id, sorted(times.items()), last)


def write_point_times(
    run_id: int, own: dict[tuple[str, int], int], again: set[tuple[str, int]]
) -> None:
    """Own time rows for the (key, step) points in `own` (their time is not their step's),
    and none any more for those in `again` (logged again at their step's time)."""
    if own:
        PointTime.objects.bulk_create(
            [  # sorted: one lock order for every writer
                PointTime(run_id=run_id, key=k, step=s, timestamp=t)
                for (k, s), t in sorted(own.items())
            ],
            update_conflicts=True,
            unique_fields=["run", "key", "step"],
            update_fields=["timestamp"],
        )
    if again:
        stale = PointTime.objects.filter(
            run_id=run_id, step__in={s for _, s in again}, key__in={k for k, _ in again}
        ).values_list("key", "step")
        for key, step in set(stale) & again:
            PointTime.objects.filter(run_id=run_id, key=key, step=step).delete()


def write_signs(run_id: int, odd: dict[tuple[str, int], float]) -> None:
    """Remember which gaps (non-finite points, {(key, step): value}) were ±inf; a NaN
    forgets the sign an earlier ±inf at its place left."""
    signs = {pair: (1 if v > 0 else -1) for pair, v in odd.items() if not math.isnan(v)}
    if signs:
        PointSign.objects.bulk_create(
            [
                PointSign(run_id=run_id, key=k, step=s, sign=v)
                for (k, s), v in sorted(signs.items())
            ],
            update_conflicts=True,
            unique_fields=["run", "key", "step"],
            update_fields=["sign"],
        )
    for key, step in sorted(odd.keys() - signs.keys()):  # NaN: a gap with no sign
        PointSign.objects.filter(run_id=run_id, key=key, step=step).delete()


def latest_with_times(
    run_ids: Sequence[int], keys: Collection[str] | None = None
) -> dict[int, list[dict]]:
    """{run id: [{key, value, timestamp, step}]}: each key's point at its highest step (of
    `keys` only, when given), as MLflow's JSON has it (a gap spelled "NaN" or ±"Infinity"; 0:
    no time known)."""
    out: dict[int, list[dict]] = {run_id: [] for run_id in run_ids}
    if not run_ids or (keys is not None and not keys):
        return out
    named = sorted(keys) if keys is not None else None
    for run_id, key, step, value, timestamp, sign in sql().latest_with_times(list(run_ids), named):
        out[run_id].append(
            {
                "key": key,
                "value": json_value(value, sign),
                "timestamp": timestamp or 0,
                "step": step,
            }
        )
    return out


def history_json(
    run_id: int, key: str, start_step: int, limit: int | None
) -> tuple[str, int | None]:
    """MLflow's metrics/get-history: the points of one series from `start_step` on, in step
    order, at most `limit` (None: all), as the JSON text of its list of points, and the
    first step after them (None: there is none)."""
    return sql().history_json(run_id, key, start_step, limit)
