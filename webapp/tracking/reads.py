"""MLflow's JSON shapes of Troupe's experiments, runs and metric series.

A run's `data.metrics` are the latest point of each key it logged (highest step); the Troupe
aliases the key mapping added are left out, so an MLflow client reads back exactly what it
logged (they stay readable by name through `get-history`). Every run carries two read-only
tags, `troupe.run_id` and `troupe.url`, that say where it is in Troupe. A metric's timestamp
is its own where it differs from its step's (`webapp/tracking/models.PointTime`), else its
step's (`StepTime`); points logged another way have none (0).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import connection
from django.urls import reverse

from webapp.experiments.models import Experiment, MetricPoint, Run
from webapp.tracking import artifacts
from webapp.tracking.models import (
    PointSign,
    PointTime,
    StepTime,
    TrackedExperiment,
    TrackedRun,
)
from webapp.tracking.store import TO_MLFLOW, to_ms

_POINTS, _TIMES = MetricPoint._meta.db_table, StepTime._meta.db_table
_OWN, _SIGNS = PointTime._meta.db_table, PointSign._meta.db_table
# A point's time: its own where it has one, else its step's (0 when neither: points logged
# another way than MLflow's).
_TIME_JOIN = f"""
    LEFT JOIN {_TIMES} t ON t.run_id = p.run_id AND t.step = p.step
    LEFT JOIN {_OWN} o ON o.run_id = p.run_id AND o.key = p.key AND o.step = p.step
"""
# A gap's sign: ±inf where the point was logged as one (`PointSign`), else NaN.
_SIGN_JOIN = f"""
    LEFT JOIN {_SIGNS} g ON p.value IS NULL AND g.run_id = p.run_id AND g.key = p.key
        AND g.step = p.step
"""
_INFINITY = {1: "Infinity", -1: "-Infinity"}  # protobuf's JSON spellings


def _pairs(mapping: dict[str, Any]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)} for k, v in mapping.items()]


def _value(value: float | None, sign: int | None = None) -> float | str:
    if value is None:  # protobuf's JSON spellings of NaN and ±inf
        return _INFINITY.get(sign, "NaN")  # type: ignore[arg-type]
    return value


def experiment_json(experiment: Experiment, user) -> dict[str, Any]:
    tracked = TrackedExperiment.objects.filter(experiment=experiment).first()
    mine = tracked is not None and tracked.default_of_id == user.id
    created = to_ms(experiment.created)
    return {
        "experiment_id": "0" if mine else str(experiment.id),
        "name": experiment.name,
        "artifact_location": artifacts.experiment_location(experiment.id),
        "lifecycle_stage": "active",
        "creation_time": created,
        "last_update_time": to_ms(tracked.updated) if tracked else created,
        "tags": _pairs(
            {**(tracked.tags if tracked else {}), "troupe.owner": str(experiment.owner)}
        ),
    }


def unmade_default_json() -> dict[str, Any]:
    """Experiment "0" before anything was logged into it: it exists, empty."""
    return {
        "experiment_id": "0",
        "name": "Default",
        "artifact_location": "",
        "lifecycle_stage": "active",
        "tags": [],
    }


def latest_metrics(run_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """{run id: [{key, value, timestamp, step}]}: each key's point at its highest step."""
    out: dict[int, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    if not run_ids:
        return out
    if connection.vendor == "postgresql":
        sql = f"""
            SELECT DISTINCT ON (p.run_id, p.key)
                p.run_id, p.key, p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
            FROM {_POINTS} p {_TIME_JOIN} {_SIGN_JOIN}
            WHERE p.run_id = ANY(%s) ORDER BY p.run_id, p.key, p.step DESC
        """  # noqa: S608 (table names are ours)
        params: list[Any] = [list(run_ids)]
    else:
        sql = f"""
            SELECT p.run_id, p.key, p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
            FROM {_POINTS} p {_TIME_JOIN} {_SIGN_JOIN}
            WHERE p.run_id IN ({",".join(["%s"] * len(run_ids))})
              AND p.step = (SELECT MAX(q.step) FROM {_POINTS} q
                            WHERE q.run_id = p.run_id AND q.key = p.key)
            ORDER BY p.run_id, p.key
        """  # noqa: S608
        params = list(run_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for run_id, key, step, value, timestamp, sign in cursor.fetchall():
            out[run_id].append(
                {"key": key, "value": _value(value, sign), "timestamp": timestamp or 0,
                 "step": step}
            )  # fmt: skip
    return out


def runs_json(runs: Sequence[Run], user) -> list[dict[str, Any]]:
    """Runs in MLflow's shape, their latest metrics read in one query."""
    latest = latest_metrics([run.id for run in runs])
    defaults = set(
        TrackedExperiment.objects.filter(default_of=user).values_list("experiment_id", flat=True)
    )
    return [_run_json(run, latest[run.id], defaults) for run in runs]


def _run_json(run: Run, metrics: list[dict], defaults: set[int]) -> dict[str, Any]:
    try:
        tracked = run.tracked
    except TrackedRun.DoesNotExist:
        tracked = None
    aliases = tracked.aliases if tracked else {}
    run_id = tracked.uuid if tracked else str(run.id)
    start = (tracked.start_time if tracked else None) or to_ms(run.started or run.created)
    end = tracked.end_time if tracked else to_ms(run.finished)
    info = {
        "run_id": run_id,
        "run_uuid": run_id,
        "run_name": run.name,
        "experiment_id": "0" if run.experiment_id in defaults else str(run.experiment_id),
        "user_id": tracked.user_id if tracked else "",
        "status": TO_MLFLOW[run.status],
        "start_time": start,
        "artifact_uri": artifacts.artifact_uri(run, run_id),
        "lifecycle_stage": "active",
    }
    if end is not None:
        info["end_time"] = end
    params = tracked.params if tracked else {k: v for k, v in run.config.items()}
    tags = {
        **(tracked.tags if tracked else {"mlflow.runName": run.name}),
        "troupe.run_id": str(run.id),
        "troupe.url": reverse("run_detail", args=[run.id]),
    }
    return {
        "info": info,
        "data": {
            "metrics": [m for m in metrics if m["key"] not in aliases],
            "params": _pairs(params),
            "tags": _pairs(tags),
        },
        "inputs": {"dataset_inputs": tracked.inputs} if tracked and tracked.inputs else {},
    }


_HISTORY_POINTS = """
    SELECT array_agg(step ORDER BY step), array_agg(coalesce(value::text, '"NaN"') ORDER BY step)
    FROM (SELECT step, value FROM {points}
          WHERE run_id = %s AND key = %s AND step >= %s ORDER BY step LIMIT %s) q
"""
_HISTORY_TIMES = """
    SELECT array_agg(step ORDER BY step), array_agg(timestamp ORDER BY step)
    FROM {times} WHERE run_id = %s AND step >= %s AND step <= %s
"""

_HISTORY_OWN_TIMES = """
    SELECT step, timestamp FROM {own} WHERE run_id = %s AND key = %s AND step >= %s AND step <= %s
"""


def metric_history_json(run_id: int, key: str, start_step: int, limit: int | None
                        ) -> tuple[str, int | None]:  # fmt: skip
    """PostgreSQL only: the same points as `metric_history`, as the JSON text of the list,
    and the first step after them, if any. Two index range scans, each one row of arrays in
    binary (the series, its values printed by PostgreSQL: shortest-exact, as `repr` prints
    them, a quarter faster; its steps' times), merged here: a join in the database is
    planned as 10,000 index probes while the tables' statistics are fresh (a newly logged
    run), and a dict a point would cost more than the text (issue 12)."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        sql = _HISTORY_POINTS.format(points=_POINTS)
        cursor.execute(sql, [run_id, key, start_step, limit], binary=True)  # LIMIT NULL: all
        steps, values = cursor.fetchone()
        if not steps:
            return "[]", None
        sql = _HISTORY_TIMES.format(times=_TIMES)
        cursor.execute(sql, [run_id, steps[0], steps[-1]], binary=True)
        time_steps, stamps = cursor.fetchone()
        cursor.execute(_HISTORY_OWN_TIMES.format(own=_OWN), [run_id, key, steps[0], steps[-1]])
        own = dict(cursor.fetchall())
        following = None
        if limit is not None and len(steps) == limit:
            cursor.execute(
                f"SELECT min(step) FROM {_POINTS} WHERE run_id = %s AND key = %s AND step > %s",
                [run_id, key, steps[-1]],
            )
            following = cursor.fetchone()[0]
        if '"NaN"' in values:  # gaps: those logged as ±inf say so
            cursor.execute(
                f"SELECT step, sign FROM {_SIGNS} WHERE run_id = %s AND key = %s "
                "AND step >= %s AND step <= %s",
                [run_id, key, steps[0], steps[-1]],
            )
            if signs := dict(cursor.fetchall()):
                values = [
                    f'"{_INFINITY[signs[s]]}"' if v == '"NaN"' and s in signs else v
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


def metric_history(run_id: int, key: str, start_step: int, limit: int | None) -> list[dict]:
    """The points of one series from `start_step` on, in step order, at most `limit`."""
    sql = f"""
        SELECT p.step, p.value, coalesce(o.timestamp, t.timestamp), g.sign
        FROM {_POINTS} p {_TIME_JOIN} {_SIGN_JOIN}
        WHERE p.run_id = %s AND p.key = %s AND p.step >= %s ORDER BY p.step
    """  # noqa: S608
    params: list[Any] = [run_id, key, start_step]
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        {"key": key, "value": _value(value, sign), "timestamp": timestamp or 0, "step": step}
        for step, value, timestamp, sign in rows
    ]
