"""Every point an MLflow client logged, not only each step's last: the store's side of it.

The metric table holds one value a (run, key, step), the one logged last (by its timestamp),
which every page and verdict reads. MLflow keeps every (key, step, timestamp, value) a client
sends and drops only exact repeats, so the others are kept as `EarlierPoint` rows
(`webapp/tracking/models.py`) and merged back into MLflow's metrics/get-history. Which point
stands and which waits here is `webapp/tracking/store.py`'s choice; this module only reads
and writes the rows.

A value is compared and stored as (value, gap): a finite value with gap 0, else value 0 and
gap 1 (+inf), -1 (-inf) or 2 (NaN), so that NaN equals NaN and the database's unique row can
drop a repeat.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from django.db import connection

from webapp.metrics.models import EarlierPoint
from webapp.metrics.tables import INFINITY, POINTS, SIGN_JOIN, TIME_JOIN, placeholders

NAN_GAP = 2
Record = tuple[int, float, int]  # (timestamp, value, gap): one logged point at a (key, step)


def as_record(timestamp: int, value: float) -> Record:
    """A logged value as a record that compares equal to an exact repeat (NaN included)."""
    if math.isfinite(value):
        return timestamp, value, 0
    return timestamp, 0.0, NAN_GAP if math.isnan(value) else (1 if value > 0 else -1)


def stored_records(run_id: int, pairs: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Record]:
    """{(key, step): the record standing in the metric table} of those `pairs` it holds."""
    pairs = set(pairs)
    if not pairs:
        return {}
    keys, steps = sorted({k for k, _ in pairs}), sorted({s for _, s in pairs})
    sql = f"""
        SELECT p.key, p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
        FROM {POINTS} p {TIME_JOIN} {SIGN_JOIN}
        WHERE p.run_id = %s AND p.key IN ({placeholders(len(keys))})
          AND p.step IN ({placeholders(len(steps))})
    """  # noqa: S608 (table names are ours)
    found: dict[tuple[str, int], Record] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, *keys, *steps])
        for key, step, value, timestamp, sign in cursor.fetchall():
            if (key, step) in pairs:
                gap = 0 if value is not None else (sign or NAN_GAP)
                found[key, step] = (timestamp or 0, value if value is not None else 0.0, gap)
    return found


def earlier_records(run_id: int, pairs: Iterable[tuple[str, int]]) -> set[tuple[str, int, Record]]:
    """The earlier points kept at those (key, step) `pairs`, as (key, step, record)."""
    pairs = set(pairs)
    if not pairs:
        return set()
    rows = EarlierPoint.objects.filter(
        run_id=run_id, key__in={k for k, _ in pairs}, step__in={s for _, s in pairs}
    ).values_list("key", "step", "timestamp", "value", "gap")
    return {(k, s, (t, v, g)) for k, s, t, v, g in rows if (k, s) in pairs}


def keep_earlier(run_id: int, rows: Iterable[tuple[str, int, Record]]) -> None:
    """Keep these points as earlier ones; a row kept already stays once (a replay)."""
    EarlierPoint.objects.bulk_create(
        [  # sorted: one lock order for every writer
            EarlierPoint(run_id=run_id, key=k, step=s, timestamp=t, value=v, gap=g)
            for k, s, (t, v, g) in sorted(set(rows))
        ],
        ignore_conflicts=True,
    )


def has_earlier(run_id: int, key: str) -> bool:
    return EarlierPoint.objects.filter(run_id=run_id, key=key).exists()


def earlier_json(run_id: int, key: str) -> list[dict]:
    """The series' earlier points as MLflow's JSON has them, in (step, timestamp) order."""
    rows = EarlierPoint.objects.filter(run_id=run_id, key=key).order_by("step", "timestamp")
    return [
        {"key": key, "value": v if g == 0 else INFINITY.get(g, "NaN"), "timestamp": t, "step": s}
        for s, t, v, g in rows.values_list("step", "timestamp", "value", "gap")
    ]


def every_point_json(run_id: int, key: str, current: str) -> list[dict]:
    """One series' every point, in (step, timestamp) order: `current` (the JSON text of its
    standing points, `history_json`'s) merged with the earlier ones; at one step and time
    the standing point comes last, as it was logged last."""
    standing = [(p, 1) for p in json.loads(current)]
    merged = [(p, 0) for p in earlier_json(run_id, key)] + standing
    merged.sort(key=lambda pair: (pair[0]["step"], pair[0]["timestamp"], pair[1]))
    return [point for point, _ in merged]
