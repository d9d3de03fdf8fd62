"""One lease for every kind of background job a worker runs (training runs, swap jobs, …).

A job is a row with `status` (queued → running → succeeded, failed or cancelled), `worker`,
`heartbeat`, `attempts`, `cancel_requested`, `started` and `finished`. A `JobKind` says which
model holds it, which Celery task runs it, how a failure is written and where its log lines
go; each kind registers itself once (`register`, from its app's queueing module) and then gets
every step below, the same for all:

- `send`: publish the job's task by name, only the id; a broker that cannot be reached fails
  the job at once with the reason (QueueUnavailable).
- `claim`: the conditional UPDATE queued → running that only one claimant wins; it increments
  `attempts`, and the attempt is this worker's lease (`Lease`). A redelivered message finds
  the job taken and does nothing.
- `Lease.beat`: every write of the holder is conditional on the lease (status running, the
  same attempt); 0 rows means the job was taken over (queued again, cancelled by the sweep)
  or deleted, and the holder stops and writes nothing (`Lease.lost`).
- `Lease.finish`: the outcome, if the lease still holds — False (the lost-claim check) when it
  matched no row, so a worker never reports a success nobody stored.
- `Beating`: a thread that beats every TROUPE_HEARTBEAT_SECONDS while a long block runs.
- `cancel`: a queued job is cancelled at once; a running one is asked to stop
  (`cancel_requested`), which its worker reads at its next beat or step.
- `requeue_stale` (the sweep, every worker, every TROUPE_SWEEP_SECONDS) and `hand_back`
  (`make run` stopping its worker): a running job whose worker stopped beating, or stopped,
  is queued again — keeping its place in the queue — cancelled when a cancel was requested,
  and failed (WorkerLost) after TROUPE_MAX_ATTEMPTS lost workers; a stop is no fault of the
  job and counts against no attempt limit.

Every move between states is one conditional UPDATE, so two workers, sweeps or requests
racing over a job never both win.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Model, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.experiments.models import Run

log = logging.getLogger(__name__)

# Every kind of job has a run's statuses (the swap job's are the run's own).
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    Run.QUEUED,
    Run.RUNNING,
    Run.SUCCEEDED,
    Run.FAILED,
    Run.CANCELLED,
)


# What a database that is restarting or unreachable raises. Anything else is a bug or a
# deleted job, and retrying would not help.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


def drop_connection() -> None:
    """Forget this thread's broken connection, so that the next query opens a new one."""
    try:
        connection.close()
    except Exception:  # closing a dead connection may fail too; it is gone either way
        pass


def _no_log(job_id: int, line: str) -> None:
    """A kind that keeps no log lines."""


@dataclass(frozen=True)
class JobKind:
    name: str  # how log lines and errors name one: "run", "swap job"
    model: type[Model]  # the rows: the fields in the module's docstring
    task: str  # the Celery task that runs one, sent by name with the row's id
    queue: Callable[[Any], str]  # the queue a job of this kind is sent to
    failed: Callable[[str, str], dict[str, Any]]  # (error type, message) → the row's fields
    note: Callable[[int, str], None] = _no_log  # (id, line): a line in the job's log
    scope: dict[str, Any] = field(default_factory=dict)  # rows of the model that are jobs
    task_id_field: str = ""  # a field that keeps the id of the task last sent, if any
    retry_advice: str = "Queue it again once the broker is back."  # after a failed send

    def rows(self) -> QuerySet:
        return self.model.objects.filter(**self.scope)


_kinds: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    """Make `kind` part of the sweep and of the hand-back on stop; returns it."""
    _kinds[kind.name] = kind
    return kind


def kinds() -> list[JobKind]:
    return list(_kinds.values())


# --- sending -------------------------------------------------------------------------------

_last_send_ms = 0
_send_lock = threading.Lock()


def _monotonic_ms() -> int:
    return int(round(time.monotonic() * 1000))  # kombu's filesystem transport's own clock


def _send_in_order(send: Callable[[], Any]) -> None:
    """Call `send` once the clock has moved past the millisecond the previous send ended in
    (a millisecond's wait at most). kombu's filesystem transport names a message
    `<monotonic ms>_<uuid>` and hands messages out in name order, so two sent within one
    millisecond come out in random order: jobs queued together would not start in the order
    they were queued."""
    global _last_send_ms
    with _send_lock:
        while _monotonic_ms() <= _last_send_ms:
            time.sleep(0.0002)
        try:
            send()
        finally:
            _last_send_ms = _monotonic_ms()  # the message's name holds this or an earlier ms


def send(kind: JobKind, job: Any) -> bool:
    """Publish the job's task; when the broker cannot be reached the job fails
    (QueueUnavailable) with the reason, so it can be queued again later instead of waiting
    forever."""
    from webapp.celery import app  # the Celery app only: no task module, no trainer

    task_id = str(uuid.uuid4())
    if kind.task_id_field:
        kind.rows().filter(id=job.id).update(**{kind.task_id_field: task_id})
    try:
        publish = partial(
            app.send_task, kind.task, args=[job.id], queue=kind.queue(job), task_id=task_id
        )
        if urlsplit(app.conf.broker_url or "").scheme == "filesystem":
            _send_in_order(publish)
        else:
            publish()
    except Exception as exc:  # kombu and redis-py raise many types; the advice is the same
        reason = " ".join(str(exc).split()) or type(exc).__name__
        log.warning("could not queue %s %s: %s", kind.name, job.id, reason)
        message = f"Could not reach the task queue: {reason}. {kind.retry_advice}"
        kind.rows().filter(id=job.id, status=QUEUED).update(
            status=FAILED, finished=timezone.now(), **kind.failed("QueueUnavailable", message)
        )
        return False
    return True


def send_on_commit(kind: JobKind, job: Any) -> None:
    """Send once the transaction that queued the job commits: a worker never looks for a job
    that is not there yet, and nothing is sent for a rolled-back one."""
    transaction.on_commit(partial(send, kind, job))


# --- the holder's side ---------------------------------------------------------------------


def claim(kind: JobKind, job_id: int, worker: str, **fields: Any) -> int | None:
    """Take the job if it is still queued: the attempt now held, or None when another
    claimant won (or the job was finished, cancelled or deleted meanwhile). `fields` are
    written with the claim."""
    now = timezone.now()
    claimed = (
        kind.rows()
        .filter(id=job_id, status=QUEUED)
        .update(
            status=RUNNING,
            worker=worker,
            heartbeat=now,
            started=Coalesce("started", now),
            attempts=F("attempts") + 1,
            **fields,
        )
    )
    if not claimed:
        return None
    return kind.rows().values_list("attempts", flat=True).filter(id=job_id).first()


@dataclass
class Lease:
    """A worker's hold on one job: its attempt. Every write goes through `held()`."""

    kind: JobKind
    job_id: int
    attempt: int
    lost: bool = False  # taken over or deleted: stop, write nothing more

    def held(self) -> QuerySet:
        """The job's row, if this attempt still holds it."""
        return self.kind.rows().filter(id=self.job_id, status=RUNNING, attempts=self.attempt)

    def beat(self, **fields: Any) -> bool:
        """Beat, writing `fields` too, if the lease holds; False (and `lost`) when it does not."""
        if self.held().update(heartbeat=timezone.now(), **fields):
            return True
        self.lost = True
        return False

    def cancel_requested(self) -> bool:
        """Whether the job should stop: a cancel was asked for, or the lease was lost."""
        row = self.kind.rows().filter(id=self.job_id).values("attempts", "cancel_requested")
        row = row.first()
        if row is None or row["attempts"] != self.attempt:
            self.lost = True
        return self.lost or bool(row and row["cancel_requested"])

    def finish(self, status: str, **fields: Any) -> bool:
        """Record the outcome if the lease still holds. False when no row matched: the job
        was taken over or deleted, and the outcome is not this worker's to report."""
        now = timezone.now()
        if self.held().update(status=status, finished=now, heartbeat=now, **fields):
            return True
        self.lost = True
        return False


class Beating:
    """A thread that calls `beat()` every TROUPE_HEARTBEAT_SECONDS until stopped: a silent
    worker looks like a dead one to the sweep. `beat` must ride out its own errors;
    one that escapes is logged and the beating goes on."""

    def __init__(self, beat: Callable[[], Any], name: str, seconds: float | None = None):
        self.seconds = seconds or settings.TROUPE_HEARTBEAT_SECONDS
        self._beat = beat
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=self.seconds + 30)

    def _loop(self) -> None:
        try:
            while not self._stopping.wait(self.seconds):
                try:
                    self._beat()
                except Exception:  # the heartbeat must outlive any one bad write
                    log.exception("%s failed", self._thread.name)
        finally:
            drop_connection()  # this thread's own connection


@contextmanager
def beating(beat: Callable[[], Any], name: str) -> Iterator[None]:
    """Beat while the block runs (`Beating`)."""
    beater = Beating(beat, name)
    beater.start()
    try:
        yield
    finally:
        beater.stop()


# --- the queue's side ----------------------------------------------------------------------


def cancel(kind: JobKind, job_id: int) -> str:
    """Cancel a queued job at once, or ask a running one to stop at its next step.

    Returns the job's status afterwards ("cancelled", "running", or a finished status when
    there was nothing to cancel; "" for a job that is not there).
    """
    rows = kind.rows()
    if rows.filter(id=job_id, status=QUEUED).update(
        status=CANCELLED, finished=timezone.now(), cancel_requested=True
    ):
        kind.note(job_id, "Cancelled before it started.")
        return CANCELLED
    if rows.filter(id=job_id, status=RUNNING).update(cancel_requested=True):
        kind.note(job_id, f"Cancel requested; the {kind.name} stops after its current step.")
        return RUNNING
    return rows.filter(id=job_id).values_list("status", flat=True).first() or ""


def requeue_stale(kind: JobKind) -> list[int]:
    """Queue again each running job silent for over TROUPE_STALE_RUN_SECONDS (a crash, a
    kill, a lost node); it goes on from where it was. Returns the ids queued again."""
    cutoff = timezone.now() - timedelta(seconds=settings.TROUPE_STALE_RUN_SECONDS)
    silent = Q(heartbeat__lt=cutoff) | Q(heartbeat__isnull=True, started__lt=cutoff)
    return _requeue(kind, silent, "stopped answering", limit_attempts=True)


def hand_back(kind: JobKind, worker: str) -> list[int]:
    """Queue again the running jobs of `worker`, a worker known to have stopped (`make run`
    stopped it, or killed it after its grace period): the next start takes them at once,
    not after TROUPE_STALE_RUN_SECONDS of silence. Returns the ids queued again."""
    return _requeue(kind, Q(worker=worker), "was stopped", limit_attempts=False)


def requeue_stale_all() -> dict[str, list[int]]:
    """`requeue_stale` for every registered kind: {kind name: ids queued again}."""
    return {kind.name: requeue_stale(kind) for kind in kinds()}


def hand_back_all(worker: str) -> dict[str, list[int]]:
    """`hand_back` for every registered kind: {kind name: ids queued again}."""
    return {kind.name: hand_back(kind, worker) for kind in kinds()}


def _requeue(kind: JobKind, which: Q, what_happened: str, *, limit_attempts: bool) -> list[int]:
    now = timezone.now()
    requeued = []
    stale = kind.rows().filter(which, status=RUNNING)
    for job in stale.only("id", "attempts", "cancel_requested", "worker"):
        # The same conditions again, plus the attempt: a job that beat, finished or was
        # claimed again since the SELECT is left alone.
        mine = kind.rows().filter(which, id=job.id, status=RUNNING, attempts=job.attempts)
        silent = f"Worker {job.worker or '?'} {what_happened}"
        if job.cancel_requested:
            if mine.update(status=CANCELLED, finished=now):
                kind.note(job.id, f"{silent}; the {kind.name} was being cancelled: cancelled.")
        elif limit_attempts and job.attempts >= settings.TROUPE_MAX_ATTEMPTS:
            message = f"{silent}; the {kind.name} lost its worker {job.attempts} times."
            fields = kind.failed(
                "WorkerLost", message + " It may need more memory than the worker has."
            )
            if mine.update(status=FAILED, finished=now, **fields):
                kind.note(job.id, message + " Marked failed.")
        elif mine.update(status=QUEUED, worker="", heartbeat=None):
            # Nothing that orders the queue changes: a kind that claims in queue order
            # (runs) resumes it before the jobs queued behind it.
            kind.note(job.id, f"{silent}; queued again to resume from where it was.")
            requeued.append(job.id)
            send_on_commit(kind, kind.rows().get(id=job.id))
    return requeued
