"""The live radar's alerts: evaluate `analysis/radar.py` after points are written, keep its events.

`after_points(run_id, keys)` is the hook called after points are written, by the one write
path every writer uses (`webapp.alerts.points.record_points`: the metrics API, the workers'
reporter, the MLflow endpoints). It does nothing unless the
batch touched a key the radar reads (`eval/accuracy`, `train/frac_zero_std`,
`role/<r>/grad_norm|grad_share|entropy`, and `train/loss` and `train/reward`, whose
non-finite value is an alert of its own: `analysis.radar.non_finite_events`): most batches
of a worker do, but e.g. system metrics alone cost nothing. Otherwise, once the write
commits, it queues the Celery task `evaluate_radar` on the `radar` queue, due
`TROUPE_RADAR_MIN_SECONDS` (2) later, unless one is queued for the run already (the run's
`radar_due` column, set by a conditional UPDATE): a client sending many batches a second
queues one evaluation a window, in any number of web processes, and the last batch is still
judged. The write path never runs the radar itself. The task reads the radar's series of the
run in one query, runs the radar (a few milliseconds on a 1,000-step run, BENCHMARKS.md) and
makes the run's `Alert` rows say what the radar says, with one upsert. What is a cliff is
decided by `analysis.radar.radar` alone: this module stores its verdicts, and the trainer's
`stop_after_cliff` (`trainer/stop_policy.py`) calls the same function.

- an event is a row unique on (run, kind, role, step); a provisional event that becomes
  confirmed is the same row updated; a provisional one the radar no longer reports (a cliff
  the run recovered from, or one the run ended without confirming) is kept as *retracted*:
  `retracted` says when, `retraction` why ("no longer seen at step 90: the series
  recovered"), and the Alerts page and API show it as such; reported again, it is current
  again. Confirmed events are stable by the radar's contract (a later call returns them
  unchanged), so they only go when the points under them were rewritten (a resumed run logs
  its steps again): those are deleted.
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
import urllib.request
from collections.abc import Iterable
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from analysis.radar import NON_FINITE_KINDS, radar
from vocabulary.names import RADAR_KEYS, RADAR_ROLE_METRICS, ROLE_PREFIX, radar_reads
from webapp.celery import app
from webapp.experiments.models import Alert, Run
from webapp.metrics import selected_series

log = logging.getLogger(__name__)

ROLE_SUFFIXES = tuple(f"/{metric}" for metric in RADAR_ROLE_METRICS)
_UPDATED = ["key", "seen_at", "provisional", "value", "limit", "retracted", "retraction"]
RADAR_QUEUE = "radar"  # its own worker: a run's worker trains, one task at a time
LOST_AFTER_SECONDS = 300


def after_points(run_id: int, keys: Iterable[str]) -> bool:
    """The hook after points of `run_id` were stored: ask for an evaluation when `keys`
    matter, once the caller's transaction commits (the task must see the points). True when
    asked; nothing is evaluated here."""
    if not any(radar_reads(key) or key in NON_FINITE_KINDS for key in keys):
        return False
    transaction.on_commit(partial(request_evaluation, run_id))
    return True


def request_evaluation(run_id: int) -> bool:
    """Queue one evaluation of the run, due in `TROUPE_RADAR_MIN_SECONDS`, unless one is
    queued already: then the points just written will be read by that one. True when queued.

    The run's `radar_due` is the debounce: the conditional UPDATE that sets it succeeds for
    one writer of a burst, in whichever process. A mark older than the window plus
    `LOST_AFTER_SECONDS` belongs to a message that never ran (a broker emptied by hand):
    the next write queues again. A broker that refuses the message is logged; the write
    stands and the run's end still settles its verdict (`settle_run`).
    """
    window = settings.TROUPE_RADAR_MIN_SECONDS
    now = timezone.now()
    due = now + timedelta(seconds=window)
    lost = now - timedelta(seconds=window + LOST_AFTER_SECONDS)
    unmarked = Q(radar_due=None) | Q(radar_due__lt=lost)
    if not Run.objects.filter(unmarked, id=run_id).update(radar_due=due):
        return False
    try:
        evaluate_radar.apply_async((run_id,), countdown=window, queue=RADAR_QUEUE)
    except Exception:  # the broker is unreachable: never fail (or undo) the write for it
        log.exception("run %s: could not queue the live radar's evaluation", run_id)
        Run.objects.filter(id=run_id, radar_due=due).update(radar_due=None)
        return False
    return True


@app.task(name="webapp.experiments.alerts.evaluate_radar", ignore_result=True)
def evaluate_radar(run_id: int) -> None:
    """The queued evaluation (a worker on the `radar` queue). The mark goes first: a write
    that commits after it queues the next evaluation, one before it is read by this one."""
    Run.objects.filter(id=run_id).update(radar_due=None)
    _evaluate(run_id)


def _evaluate(run_id: int) -> list[Alert] | None:
    run = Run.objects.filter(id=run_id).only("id", "status", "total_steps", "sharing").first()
    if run is None:
        return None
    return refresh_alerts(run)


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
        Run.objects.filter(
            status__in=Run.FINISHED, alerts__provisional=True, alerts__retracted__isnull=True
        )
        .distinct()
        .only("id", "status", "total_steps", "sharing")
    )
    settled = []
    for run in runs:
        if refresh_alerts(run) is not None:
            settled.append(run.id)
    return settled


def radar_series(run_id: int) -> dict[str, tuple[list[int], list[float | None]]]:
    """The series the radar reads, in one query: {key: (steps, values)} (unordered: the
    radar sorts)."""
    keys = [*RADAR_KEYS, *NON_FINITE_KINDS]
    return selected_series(run_id, keys, prefix=ROLE_PREFIX, suffixes=ROLE_SUFFIXES)


def _refresh(run: Run) -> list[Alert]:
    series = radar_series(run.id)
    running = run.status in Run.ACTIVE
    result = radar(
        series,
        running=running,
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
    _retire(run.id, {(a.kind, a.role, a.step) for a in rows}, _why_gone(series, running))
    if rows:
        Alert.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["run", "kind", "role", "step"],
            update_fields=_UPDATED,
        )
    _notify_new(run.id)
    return list(
        Alert.objects.filter(run_id=run.id, retracted__isnull=True).order_by("step", "kind", "role")
    )


def _retire(run_id: int, current: set[tuple], why: str) -> None:
    """The run's events the radar no longer reports: a provisional one is retracted (kept,
    with when and `why`), a confirmed one deleted (its points were rewritten)."""
    gone: dict[bool, list[int]] = {True: [], False: []}
    stored = Alert.objects.filter(run_id=run_id, retracted__isnull=True)
    for pk, kind, role, step, provisional in stored.values_list(
        "pk", "kind", "role", "step", "provisional"
    ):
        if (kind, role, step) not in current:
            gone[provisional].append(pk)
    if gone[True]:
        Alert.objects.filter(pk__in=gone[True]).update(retracted=timezone.now(), retraction=why)
    if gone[False]:
        Alert.objects.filter(pk__in=gone[False]).delete()


def _why_gone(series: dict, running: bool) -> str:
    """Why a provisional event is no longer reported, in words for the Alerts page."""
    if not running:
        return "the run ended without confirming it"
    last = max((max(steps) for steps, _values in series.values() if steps), default=None)
    return f"no longer seen at step {last}: the series recovered"


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
        # When and why the radar stopped reporting a provisional event (None: it still does)
        "retracted": alert.retracted.isoformat() if alert.retracted else None,
        "retraction": alert.retraction or None,
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
    if alert.retracted:
        state = f"retracted: {alert.retraction}"
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
