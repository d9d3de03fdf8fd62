"""The live radar's alerts: evaluate `analysis/radar.py` after points are written, keep its events.

`after_points(run_id, keys)` is the one hook of every write path: `write_points` calls it
after storing a batch (so the metrics API, the workers' reporter and the MLflow endpoints
all reach it), and any other writer of points may call it too. It does nothing unless the
batch touched a key the radar reads (`eval/accuracy`, `train/frac_zero_std`,
`role/<r>/grad_norm|grad_share|entropy`): most batches of a worker do, but e.g. system
metrics alone cost nothing. Then it reads those series of the run in one query, runs the
radar (a few milliseconds on a 1,000-step run, BENCHMARKS.md) and makes the run's `Alert`
rows say what the radar says, with one upsert. A run is evaluated at most once every
`TROUPE_RADAR_MIN_SECONDS` (2) by one process: a batch inside that window only schedules one
trailing evaluation at its end (a timer thread), so a client sending many batches a second
pays for the radar once per window and the last batch is still judged.

- an event is a row unique on (run, kind, role, step); a provisional event that becomes
  confirmed is the same row updated; a provisional one the radar no longer reports (a cliff
  the run recovered from) is deleted. Confirmed events are stable by the radar's contract (a
  later call returns them unchanged), so they only go when the points under them were
  rewritten (a resumed run logs its steps again).
- a confirmed event is handed once to the webhook (`TROUPE_ALERT_WEBHOOK_URL`): the
  conditional UPDATE that sets `notified` picks who sends it, and the POST is made by a
  background thread after the transaction commits, with a short timeout; a failure is
  logged, never raised, so the metric write neither waits for nor fails on the webhook.

`refresh_alerts(run)` evaluates a run whatever the keys. `settle_run(run_id)` is the radar's
last word on a run that just ended, with `running=False` (a finished run's §6 cliff is
confirmed even if it was never down for a whole final window while training; a provisional
event it never confirmed goes): every path that ends a run calls it in the transaction that
records the end (the worker's `finish`, the API's and the MLflow endpoint's), so the page that
shows the run finished shows its verdict too. `settle_finished_runs()` settles every finished
run that still has provisional alerts; the workers' periodic sweep calls it, as the fallback
for a run ended some other way. A failure of the radar is logged and leaves the points
written.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Iterable
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from analysis.radar import radar
from trainer.names import RADAR_KEYS, RADAR_ROLE_METRICS, radar_reads
from webapp.experiments.models import Alert, MetricPoint, Run

log = logging.getLogger(__name__)

ROLE_SUFFIXES = tuple(f"/{metric}" for metric in RADAR_ROLE_METRICS)
KINDS = (
    "cliff",
    "degradation",
    "amplification",
    "capture",
    "entropy_collapse",
    "zero_std_groups",
)
_UPDATED = ["key", "seen_at", "provisional", "value", "limit"]


def after_points(run_id: int, keys: Iterable[str]) -> list[Alert] | None:
    """The hook after points of `run_id` were stored: re-evaluate when `keys` matter.

    Returns the run's alerts after the update, or None when nothing was evaluated (no key
    the radar reads, the run is gone, or the radar failed — which is logged, not raised).
    """
    if not any(radar_reads(key) for key in keys):
        return None
    if _throttled(run_id, settings.TROUPE_RADAR_MIN_SECONDS):
        return None
    return _evaluate(run_id)


def _evaluate(run_id: int) -> list[Alert] | None:
    run = Run.objects.filter(id=run_id).only("id", "status", "total_steps", "sharing").first()
    if run is None:
        return None
    return refresh_alerts(run)


_lock = threading.Lock()
_last: dict[int, float] = {}  # run id -> time.monotonic() of its last evaluation here
_pending: set[int] = set()  # runs with a trailing evaluation scheduled


def _throttled(run_id: int, window: float) -> bool:
    """True when `run_id` was evaluated less than `window` seconds ago: then one trailing
    evaluation is scheduled for the end of the window (if none is) and this batch waits."""
    if window <= 0:
        return False
    now = time.monotonic()
    with _lock:
        last = _last.get(run_id)
        if last is None or now - last >= window:
            _last[run_id] = now
            if len(_last) > 10_000:  # forget runs evaluated long ago
                for stale in [r for r, t in _last.items() if now - t >= window]:
                    del _last[stale]
            return False
        if run_id not in _pending:
            _pending.add(run_id)
            timer = threading.Timer(window - (now - last), _trailing, args=(run_id,))
            # Not a daemon: a process that ends right after its last batch (`import_runs`, a
            # worker's last flush) waits for it, at most one window, so it is still judged.
            timer.daemon = False
            timer.start()
        return True


def _trailing(run_id: int) -> None:
    with _lock:
        _pending.discard(run_id)
        _last[run_id] = time.monotonic()
    try:
        _evaluate(run_id)
    except Exception:  # a timer thread has no caller to tell
        log.exception("run %s: the trailing radar evaluation failed", run_id)
    finally:
        connection.close()  # this thread's own connection


def refresh_alerts(run: Run) -> list[Alert] | None:
    """Evaluate the radar on `run`'s points and store its events; None if that failed."""
    try:
        # A savepoint: a failure here rolls back only the alerts, never the caller's points.
        with transaction.atomic():
            return _refresh(run)
    except Exception:  # the points are written; a radar failure must not undo or fail that
        log.exception("run %s: the live radar failed; its alerts are unchanged", run.id)
        return None


def settle_run(run_id: int) -> list[Alert] | None:
    """Evaluate a run that just ended (call it in the transaction that ends it)."""
    return _evaluate(run_id)


def settle_finished_runs() -> list[int]:
    """Evaluate, as finished, every finished run that still has provisional alerts."""
    runs = (
        Run.objects.filter(status__in=Run.FINISHED, alerts__provisional=True)
        .distinct()
        .only("id", "status", "total_steps", "sharing")
    )
    settled = []
    for run in runs:
        if refresh_alerts(run) is not None:
            settled.append(run.id)
    return settled


_RADAR_KEYS = (
    "run_id = %s AND (key = ANY(%s) OR (key LIKE 'role/%%' AND ("
    + " OR ".join(f"key LIKE '%%{suffix}'" for suffix in ROLE_SUFFIXES)
    + ")))"
)


# The run's distinct keys, one index descent each (a "skip scan" over the (run, key, step)
# primary key), filtered to those the radar reads; then only those keys' points. Filtering
# the run's points by pattern instead visits every point of every key (80,000 rows on a
# 2,000-step run of 40 keys, for 8,000 the radar reads: ten times the time, issue 12).
_RADAR_SERIES = """
WITH RECURSIVE keys(key) AS (
    (SELECT key FROM {table} WHERE run_id = %(run)s ORDER BY key LIMIT 1)
    UNION ALL
    SELECT (SELECT key FROM {table} WHERE run_id = %(run)s AND key > keys.key ORDER BY key LIMIT 1)
    FROM keys WHERE keys.key IS NOT NULL
)
SELECT key, array_agg(step), array_agg(value) FROM {table}
WHERE run_id = %(run)s AND key = ANY(ARRAY(SELECT key FROM keys WHERE {where}))
GROUP BY key
"""


def radar_series(run_id: int) -> dict[str, tuple[list[int], list[float | None]]]:
    """The series the radar reads, in one query: {key: (steps, values)} (unordered: the
    radar sorts). On PostgreSQL one row a key with its arrays, in binary, as
    `series.read_series` does: a tenth of the time of one row a point (BENCHMARKS.md)."""
    params = [run_id, list(RADAR_KEYS)]
    table = MetricPoint._meta.db_table
    if connection.vendor == "postgresql":
        where = _RADAR_KEYS.replace("run_id = %s AND ", "").replace("%s", "%(keys)s")
        sql = _RADAR_SERIES.format(table=table, where=where)
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, {"run": run_id, "keys": params[1]}, binary=True)
            return {key: (steps, values) for key, steps, values in cursor.fetchall()}
    series: dict[str, tuple[list, list]] = {}
    where = _RADAR_KEYS.replace("= ANY(%s)", "IN (%s, %s, %s)")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, step, value FROM {table} WHERE {where}", [run_id, *params[1]])
        for key, step, value in cursor.fetchall():
            steps, values = series.setdefault(key, ([], []))
            steps.append(step)
            values.append(value)
    return series


def _refresh(run: Run) -> list[Alert]:
    result = radar(
        radar_series(run.id),
        running=run.status in Run.ACTIVE,
        sharing=run.sharing or None,
        total_steps=run.total_steps or None,  # external runs may not say how long they are
    )
    rows = [
        Alert(
            run_id=run.id,
            kind=event["kind"],
            role=event["role"] or "",
            key=event["key"],
            step=event["step"],
            seen_at=event["seen_at"],
            provisional=event["provisional"],
            value=event["value"],
            limit=event["limit"],
        )
        for event in result["events"]
    ]
    current = {(a.kind, a.role, a.step) for a in rows}
    stale = [
        pk
        for pk, kind, role, step in Alert.objects.filter(run_id=run.id).values_list(
            "pk", "kind", "role", "step"
        )
        if (kind, role, step) not in current
    ]
    if stale:
        Alert.objects.filter(pk__in=stale).delete()
    if rows:
        Alert.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["run", "kind", "role", "step"],
            update_fields=_UPDATED,
        )
    _notify_new(run.id)
    return list(Alert.objects.filter(run_id=run.id).order_by("step", "kind", "role"))


def _notify_new(run_id: int) -> None:
    """Claim the run's confirmed, not yet notified alerts and send each once after commit."""
    url = settings.TROUPE_ALERT_WEBHOOK_URL
    for alert in Alert.objects.filter(run_id=run_id, provisional=False, notified=None):
        # Only the writer whose UPDATE changes the row sends it (concurrent writers of one run).
        if not Alert.objects.filter(pk=alert.pk, notified=None).update(notified=timezone.now()):
            continue
        if url:
            payload = webhook_payload(alert)
            transaction.on_commit(lambda p=payload: _send_in_background(url, p))


def alert_json(alert: Alert, run: Run | None = None) -> dict[str, Any]:
    """An alert as the API and the pages' scripts see it."""
    run = run or alert.run
    return {
        "id": alert.pk,
        "run": alert.run_id,
        "experiment": run.experiment_id,
        "kind": alert.kind,
        "role": alert.role or None,
        "key": alert.key,
        "step": alert.step,
        "seen_at": alert.seen_at,
        "provisional": alert.provisional,
        "value": alert.value,
        "limit": alert.limit,
        "created": alert.created.isoformat() if alert.created else None,
        "run_url": f"/runs/{alert.run_id}/",
    }


def webhook_payload(alert: Alert) -> dict[str, Any]:
    run = Run.objects.select_related("experiment").get(pk=alert.run_id)
    return {
        "event": "troupe.alert",
        "alert": alert_json(alert, run),
        "run": {"id": run.id, "name": run.name, "status": run.status, "step": run.step},
        "experiment": {"id": run.experiment_id, "name": run.experiment.name},
        "text": describe(alert, run),
    }


def describe(alert: Alert, run: Run | None = None) -> str:
    """One line for a person: "Run 12: cliff at step 140 (confirmed at 180)"."""
    who = f" of role {alert.role}" if alert.role else ""
    state = "provisional" if alert.provisional else f"confirmed at step {alert.seen_at}"
    label = alert.kind.replace("_", " ")
    return f"Run {alert.run_id}: {label}{who} at step {alert.step} ({state})"


def _send_in_background(url: str, payload: dict[str, Any]) -> threading.Thread:
    # Not a daemon: a worker process that ends right after its last write still sends it
    # (bounded by the timeout).
    thread = threading.Thread(target=send_webhook, args=(url, payload), name="troupe-alert-hook")
    thread.start()
    return thread


def send_webhook(url: str, payload: dict[str, Any]) -> bool:
    """POST `payload` as JSON to `url`; True on a 2xx answer. Failures are logged only."""
    body = json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.TROUPE_ALERT_WEBHOOK_TIMEOUT) as r:
            ok = 200 <= r.status < 300
    except Exception as exc:  # unreachable, refused, timed out, 4xx/5xx: log and move on
        log.warning("alert webhook %s failed: %s", url, exc)
        return False
    if not ok:
        log.warning("alert webhook %s answered %s", url, r.status)
    return ok
