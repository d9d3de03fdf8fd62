"""The metric store's statements on PostgreSQL: arrays bound and read in binary.

Each function has a twin of the same name in `webapp/metrics/portable.py`;
`webapp/metrics/dialect.py` picks one. What makes these faster (BENCHMARKS.md,
"MLflow's client against MLflow's server and Troupe's MLflow endpoint"):

- a batch of points is one `INSERT … SELECT FROM unnest(…)` with three array parameters
  (about six times faster than `bulk_create`), first tried as a plain INSERT in a savepoint
  (new points skip the speculative insertion of `ON CONFLICT`, a third of the statement's
  time), then, when a point of it is stored already, as the upsert, so replays overwrite;
- a series comes back as one row a (run, key) of arrays, in binary: a twentieth of the rows
  and none of the text parsing of one row a point;
- the radar's keys are found by a skip scan over the (run, key, step) primary key, one index
  descent a distinct key, instead of visiting every point of the run;
- the steps' times and the run's step are one statement; a new demo's points one `COPY`.

The statements run on a plain psycopg cursor over Django's connection (and transaction):
it binds arrays in binary, where Django's client-side cursor would quote 1,000 strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection, transaction

from webapp.metrics.tables import (
    INFINITY,
    OWN_TIMES,
    POINTS,
    RUNS,
    SIGN_JOIN,
    SIGNS,
    TIME_JOIN,
    TIMES,
    key_filter,
)


@contextmanager
def _cursor() -> Iterator[psycopg.Cursor]:
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor


# --- points --------------------------------------------------------------------------------------

_INSERT = f"""
INSERT INTO {POINTS} (run_id, key, step, value)
SELECT %b, k, s, v FROM unnest(%b::varchar[], %b::bigint[], %b::double precision[]) AS p(k, s, v)
"""
_UPSERT = (
    _INSERT
    + f"""ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value
WHERE {POINTS}.value IS DISTINCT FROM EXCLUDED.value
"""
)


def insert_points(run_id: int, keys: list[str], steps: list[int], values: list) -> None:
    """A sorted batch of unique (key, step) pairs, overwriting those already stored. A plain
    function scan over the arrays feeds the insert in array order: the caller's lock order."""
    params = [run_id, keys, steps, values]
    # Inside the caller's transaction the inner atomic is a savepoint; outside any, it is a
    # transaction of its own and the upsert then runs in autocommit: atomic either way.
    with _cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute(_INSERT, params)
            return
        except psycopg.errors.UniqueViolation:
            pass  # a point of the batch is stored already: overwrite, as a replay should
        cursor.execute(_UPSERT, params)


def load_new_points(rows: list[tuple[int, str, int, float]]) -> None:
    """Points none of which is stored yet: one COPY (a million rows in seconds)."""
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {POINTS} (run_id, key, step, value) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def series_rows(run_ids: list[int], keys: list[str] | None) -> list[tuple]:
    """(run_id, key, steps, values) a (run, key), unordered within: the callers sort. No
    ORDER BY, so the server needs no sort either (and never spills one to disk when
    statistics are stale)."""
    where, params = key_filter(keys)
    sql = (
        f"SELECT run_id, key, array_agg(step), array_agg(value) FROM {POINTS}"
        f" WHERE run_id = ANY(%s){where} GROUP BY run_id, key"
    )
    with _cursor() as cursor:
        cursor.execute(sql, [run_ids, *params], binary=True)
        return sorted(cursor.fetchall())


# The run's distinct keys, one index descent each (a "skip scan" over the (run, key, step)
# primary key), filtered to those asked for; then only those keys' points. Filtering the
# run's points by pattern instead visits every point of every key (80,000 rows on a
# 2,000-step run of 40 keys, for 8,000 the radar reads: ten times the time, measured).
_SELECTED_SERIES = f"""
WITH RECURSIVE keys(key) AS (
    (SELECT key FROM {POINTS} WHERE run_id = %(run)s ORDER BY key LIMIT 1)
    UNION ALL
    SELECT (SELECT key FROM {POINTS} WHERE run_id = %(run)s AND key > keys.key ORDER BY key LIMIT 1)
    FROM keys WHERE keys.key IS NOT NULL
)
SELECT key, array_agg(step), array_agg(value) FROM {POINTS}
WHERE run_id = %(run)s AND key = ANY(ARRAY(SELECT key FROM keys WHERE {{where}}))
GROUP BY key
"""


def selected_series(
    run_id: int, keys: list[str], suffixes: tuple[str, ...], prefix: str
) -> dict[str, tuple[list, list]]:
    """{key: (steps, values)} of the keys in `keys` or `prefix…suffix`, in one query."""
    where = (
        "key = ANY(%(keys)s) OR (key LIKE %(prefix)s AND ("
        + " OR ".join(f"key LIKE %(suffix{i})s" for i in range(len(suffixes)))
        + "))"
    )
    params: dict[str, Any] = {"run": run_id, "keys": keys, "prefix": prefix + "%"}
    params.update({f"suffix{i}": "%" + suffix for i, suffix in enumerate(suffixes)})
    with _cursor() as cursor:
        cursor.execute(_SELECTED_SERIES.format(where=where), params, binary=True)
        return {key: (steps, values) for key, steps, values in cursor.fetchall()}


# --- MLflow's times and reads --------------------------------------------------------------------

# The steps' times and the run's step in one statement (one round trip a batch). It returns
# the times the batch's steps already had (the statement's snapshot: before its insert).
_TIMES_UPSERT = f"""
WITH times AS (
    INSERT INTO {TIMES} (run_id, step, timestamp)
    SELECT %(run)b, s, t FROM unnest(%(steps)b::bigint[], %(times)b::bigint[]) AS p(s, t)
    ON CONFLICT (run_id, step) DO NOTHING
), moved AS (
    UPDATE {RUNS} SET step = %(last)b WHERE id = %(run)b AND step < %(last)b
)
SELECT step, timestamp FROM {TIMES} WHERE run_id = %(run)b AND step = ANY(%(steps)b::bigint[])
"""


def write_step_times(
    run_id: int, ordered: list[tuple[int, int]], last: int | None
) -> dict[int, int]:
    """Store each new (step, time) and move the run's step on to `last`; {step: time} of
    the steps already timed. step < NULL is never true: a batch of system metrics moves no
    step."""
    steps, stamps = [s for s, _ in ordered], [t for _, t in ordered]
    with _cursor() as cursor:
        cursor.execute(
            _TIMES_UPSERT, {"run": run_id, "steps": steps, "times": stamps, "last": last}
        )
        return dict(cursor.fetchall())


def latest_with_times(run_ids: list[int], keys: list[str] | None = None) -> list[tuple]:
    """(run_id, key, step, value, timestamp, sign) of each key's point at its highest step
    (of `keys` only, when given)."""
    only = "AND p.key = ANY(%s)" if keys is not None else ""
    sql = f"""
        SELECT DISTINCT ON (p.run_id, p.key)
            p.run_id, p.key, p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
        FROM {POINTS} p {TIME_JOIN} {SIGN_JOIN}
        WHERE p.run_id = ANY(%s) {only} ORDER BY p.run_id, p.key, p.step DESC
    """  # noqa: S608 (table names are ours)
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(run_ids)] + ([list(keys)] if keys is not None else []))
        return cursor.fetchall()


_HISTORY_POINTS = f"""
    SELECT array_agg(step ORDER BY step), array_agg(coalesce(value::text, '"NaN"') ORDER BY step)
    FROM (SELECT step, value FROM {POINTS}
          WHERE run_id = %s AND key = %s AND step >= %s ORDER BY step LIMIT %s) q
"""
_HISTORY_TIMES = f"""
    SELECT array_agg(step ORDER BY step), array_agg(timestamp ORDER BY step)
    FROM {TIMES} WHERE run_id = %s AND step >= %s AND step <= %s
"""
_HISTORY_OWN_TIMES = f"""
    SELECT step, timestamp FROM {OWN_TIMES}
    WHERE run_id = %s AND key = %s AND step >= %s AND step <= %s
"""


def history_json(
    run_id: int, key: str, start_step: int, limit: int | None
) -> tuple[str, int | None]:
    """One series from `start_step` on, at most `limit` points, as the JSON text of MLflow's
    list of points, and the first step after them, if any. Two index range scans, each one
    row of arrays in binary (the series, its values printed by PostgreSQL: shortest-exact,
    as `repr` prints them, a quarter faster; its steps' times), merged here: a join in the
    database is planned as 10,000 index probes while the tables' statistics are fresh (a
    newly logged run), and a dict a point would cost more than the text (measured)."""
    with _cursor() as cursor:
        cursor.execute(_HISTORY_POINTS, [run_id, key, start_step, limit], binary=True)
        steps, values = cursor.fetchone()  # LIMIT NULL: all
        if not steps:
            return "[]", None
        cursor.execute(_HISTORY_TIMES, [run_id, steps[0], steps[-1]], binary=True)
        time_steps, stamps = cursor.fetchone()
        cursor.execute(_HISTORY_OWN_TIMES, [run_id, key, steps[0], steps[-1]])
        own = dict(cursor.fetchall())
        following = None
        if limit is not None and len(steps) == limit:
            cursor.execute(
                f"SELECT min(step) FROM {POINTS} WHERE run_id = %s AND key = %s AND step > %s",
                [run_id, key, steps[-1]],
            )
            following = cursor.fetchone()[0]
        if '"NaN"' in values:  # gaps: those logged as ±inf say so
            cursor.execute(
                f"SELECT step, sign FROM {SIGNS} WHERE run_id = %s AND key = %s "
                "AND step >= %s AND step <= %s",
                [run_id, key, steps[0], steps[-1]],
            )
            if signs := dict(cursor.fetchall()):
                values = [
                    f'"{INFINITY[signs[s]]}"' if v == '"NaN"' and s in signs else v
                    for v, s in zip(values, steps, strict=True)
                ]
    if time_steps != steps:  # a step logged without a time (another writer's point): 0
        known = dict(zip(time_steps or [], stamps or [], strict=True))
        stamps = [known.get(step, 0) for step in steps]
    if own:
        stamps = [own.get(step, stamp) for step, stamp in zip(steps, stamps, strict=True)]
    head = '{"key":' + json.dumps(key) + ',"value":'
    text = ",".join(
        [f'{head}{v},"timestamp":{t},"step":{s}}}' for v, t, s in zip(values, stamps, steps)]
    )
    return f"[{text}]", following
