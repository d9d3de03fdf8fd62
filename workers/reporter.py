"""The database reporter: what `trainer.train.train` reports to, inside a Celery task.

It implements the trainer's reporter interface (`trainer/reporting.py`):

- `log(step, metrics)` buffers points and writes them in batches (one upsert per flush,
  `webapp.alerts.points.record_points`, which tells the live radar too), at most every
  `flush_seconds`.
- `should_stop()` reads the run's cancel flag; the loop calls it after every step.
- `on_checkpoint(step, path)` flushes first, waiting for the database if it must: points up
  to a checkpoint are never logged again after a resume, so they have to be stored before it.
- `on_progress(step, total, info)` records the step and writes one log line.
- `log_episodes(step, records)` buffers recorded episodes (`trainer/episode_log.py`); the
  next flush stores them with the points, idempotently (`webapp.episodes.store`).
- `on_status(text)` records what the run is doing outside its steps (the run's `phase`, shown
  on its page: "Preparing model tiny-s: warm start 40%"), written with the next flush — at
  most every `flush_seconds`, so a warm start's percentages cost a few writes a minute.

Each step's points carry `sys/db_seconds`: how long the training thread spent in this
reporter's database calls since the previous step's points were logged (the last step's
value also takes in what came after it, up to `close`), so a run's time splits into rollout,
update, evaluation and database.

A background thread (`webapp.leases.Beating`) beats every TROUPE_HEARTBEAT_SECONDS (the
stale-run sweep requeues runs that stop beating) and flushes, so points reach the database
during long steps too.

A database that is briefly unreachable (a restart, a failover) does not stop the run: failed
writes stay in the buffer and are retried on the next flush, and nothing is lost. Every write
of the run's row is conditional on the attempt this worker claimed (its `webapp.leases.Lease`):
if the run was requeued (this worker was presumed dead) or deleted, `should_stop()` turns
true and the worker lets go.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction

from vocabulary.names import DB_SECONDS_KEY
from webapp.alerts.points import record_points
from webapp.episodes.store import write_episodes
from webapp.experiments.models import Run, RunLog
from webapp.leases import TRANSIENT_DB_ERRORS, Beating, Lease, drop_connection
from webapp.metrics import Point
from webapp.runs.queueing import RUNS
from workers.tidy_errors import tidy

log = logging.getLogger(__name__)

Call = TypeVar("Call", bound=Callable[..., Any])
Result = TypeVar("Result")


def retrying(call: Callable[[], Result], wait_seconds: float = 300.0) -> Result:
    """`call()`, again every 2 s while the database is unreachable, for up to `wait_seconds`
    (then its error): for a worker's writes outside the reporter's buffer, which a restart
    must not turn into a failed run."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return call()
        except TRANSIENT_DB_ERRORS:
            drop_connection()
            if time.monotonic() >= deadline:
                raise
            time.sleep(2)


def timed(method: Call) -> Call:
    """Count the time a training-thread call spends here towards `sys/db_seconds`."""

    @functools.wraps(method)
    def wrapper(self: DatabaseReporter, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._db_seconds += time.perf_counter() - t0

    return wrapper  # type: ignore[return-value]


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


class DatabaseReporter:
    def __init__(
        self,
        run_id: int,
        attempt: int,
        *,
        heartbeat_seconds: float | None = None,
        flush_seconds: float = 2.0,
        flush_points: int = 5000,
        checkpoint_wait_seconds: float = 300.0,
    ):
        self.run_id = run_id
        self.attempt = attempt
        self.heartbeat_seconds = heartbeat_seconds or settings.TROUPE_HEARTBEAT_SECONDS
        self.flush_seconds = flush_seconds
        self.flush_points = flush_points
        self.checkpoint_wait_seconds = checkpoint_wait_seconds
        self._lock = threading.Lock()  # guards the buffers and the row state below
        self._flushing = threading.Lock()  # one flush at a time, so batches land in order
        self._points: list[Point] = []
        self._lines: list[str] = []
        self._episodes: list[dict[str, Any]] = []
        self._row: dict[str, Any] = {}  # fields of the run's row not yet written
        self._last_flush = time.monotonic()
        self._cancel = False
        self._db_seconds = 0.0  # training-thread time in database calls, not yet logged
        self._last_db_point: tuple[int, float] | None = None  # (step, value) last logged
        self.lease = Lease(RUNS, run_id, attempt)  # every write of the run's row holds it
        self._beating = Beating(self.flush, "heartbeat", self.heartbeat_seconds)

    @property
    def lost(self) -> bool:
        """The run was requeued elsewhere or deleted: stop, record nothing."""
        return self.lease.lost

    @lost.setter
    def lost(self, value: bool) -> None:
        self.lease.lost = value

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._beating.start()

    def close(self, wait_seconds: float = 300.0) -> bool:
        """Stop the heartbeat and store what is buffered, retrying for up to `wait_seconds`.

        Returns False when points could not be stored in that time (they are logged).
        """
        self._beating.stop()
        if self._last_db_point is not None:
            # The last step's calls (its checkpoint, its progress) have no later step to be
            # logged with: add them to the last step's value.
            step, value = self._last_db_point
            with self._lock:
                self._points.append((DB_SECONDS_KEY, step, value + self._db_seconds))
        stored = self._flush_until_stored(wait_seconds)
        if not stored:
            log.error("run %s: %d points could not be stored", self.run_id, len(self._points))
        return stored

    def line(self, text: str) -> None:
        """A line for the run page's log tail, stored with the next flush."""
        with self._lock:
            self._lines.append(tidy(text))  # shown to every signed-in user: no worker path

    # --- the trainer's reporter interface -------------------------------------------------------

    @timed
    def log(self, step: int, metrics: dict[str, float]) -> None:
        db_seconds, self._db_seconds = self._db_seconds, 0.0
        self._last_db_point = (step, db_seconds)
        with self._lock:
            self._points.extend((key, step, value) for key, value in metrics.items())
            self._points.append((DB_SECONDS_KEY, step, db_seconds))
            due = (
                len(self._points) >= self.flush_points
                or time.monotonic() - self._last_flush >= self.flush_seconds
            )
        if due:
            self.flush()

    @timed
    def log_episodes(self, step: int, records: list[dict[str, Any]]) -> None:
        with self._lock:  # stored with the step's points, by the flush its `log` starts
            self._episodes.extend(records)

    @timed
    def should_stop(self) -> bool:
        if self.lost:
            return True
        try:
            self._cancel = self.lease.cancel_requested()
        except TRANSIENT_DB_ERRORS:
            drop_connection()
        return self._cancel  # on an error, the last answer we had; ask again after a step

    @timed
    def on_checkpoint(self, step: int, path: str) -> None:
        with self._lock:
            self._row["checkpoint_step"] = step
        if not self._flush_until_stored(self.checkpoint_wait_seconds):
            log.error("run %s: the database stayed unreachable at checkpoint %s", self.run_id, step)

    @timed
    def on_progress(self, step: int, total: int, info: dict[str, Any]) -> None:
        with self._lock:
            self._row.update(step=step, total_steps=total)
        if info:
            parts = [f"step {step}/{total}", f"reward {_fmt(info.get('reward'))}"]
            if info.get("accuracy") is not None:
                parts.append(f"accuracy {_fmt(info['accuracy'])}")
            if info.get("step_seconds") is not None:
                parts.append(f"{info['step_seconds']:.1f} s")
            self.line(" · ".join(parts))
        self.flush()

    @timed
    def on_status(self, text: str) -> None:
        with self._lock:
            # shown to every signed-in user: no worker path
            self._row["phase"] = tidy(text)[: Run._meta.get_field("phase").max_length]
            due = time.monotonic() - self._last_flush >= self.flush_seconds
        if due:
            self.flush()

    # --- writing ---------------------------------------------------------------------------------

    def flush(self) -> bool:
        """Write buffered points, log lines and row fields; True when all are stored.

        On a transient database error everything stays buffered for the next flush.
        """
        with self._flushing:
            with self._lock:
                points, self._points = self._points, []
                lines, self._lines = self._lines, []
                row, self._row = self._row, {}
                episodes, self._episodes = self._episodes, []
                self._last_flush = time.monotonic()
            try:
                with transaction.atomic():
                    # The row first: when the run is no longer ours, nothing else is written.
                    if self._hold(row):
                        record_points(self.run_id, points)
                        RunLog.objects.bulk_create(
                            [RunLog(run_id=self.run_id, line=text) for text in lines]
                        )
                        write_episodes(self.run_id, episodes)
            except TRANSIENT_DB_ERRORS as exc:
                drop_connection()
                log.warning(
                    "run %s: database unreachable, keeping %d points: %s",
                    self.run_id,
                    len(points),
                    exc,
                )
                with self._lock:
                    # Older first, so that a key logged again later keeps its newer value.
                    self._points[:0] = points
                    self._lines[:0] = lines
                    self._episodes[:0] = episodes
                    self._row = {**row, **self._row}
                return False
            except IntegrityError:
                self.lost = True  # the run was deleted under us; its points have nowhere to go
                return True
            return True

    def _hold(self, fields: dict[str, Any]) -> bool:
        """Beat and write pending row fields, if this worker still holds the run."""
        return self.lease.beat(**fields)

    def _flush_until_stored(self, wait_seconds: float) -> bool:
        deadline = time.monotonic() + wait_seconds
        delay = 0.5
        while not self.flush():
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        return True
