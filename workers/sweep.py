"""The stale-run sweep, run by every worker: at start-up, then every TROUPE_SWEEP_SECONDS.

A run whose worker died (killed, out of memory, node lost) stays `running` with a heartbeat
that no longer moves. Each worker's main process runs the lease's sweep
(`webapp.leases.requeue_stale_all`, every kind of leased job: runs, swap jobs) in a background
thread, so such a run goes back to the queue by itself and resumes from its last checkpoint
on whichever worker takes it, with no extra process to deploy (no Celery beat) and nothing
for `make run` or compose to start. Sweeps of several workers may overlap: each requeue is a
conditional UPDATE, so a stale run is queued again exactly once.
`python manage.py sweep_runs` runs one sweep by hand. A sweep also settles the live radar's
alerts of runs that finished (`webapp.alerts.radar.settle_finished_runs`), and records
what this worker can give a run — GPUs, their memory, the host's memory
(`workers/capacity.py`, `webapp.runs.worker_gpus.advertise`).

The thread only uses the database (no torch). The worker forks a pool process after every
task (`worker_max_tasks_per_child=1`), and a fork copies whatever a thread holds at that
instant; so a sweep holds `_sweeping` while it runs, a fork waits for that lock, and the
thread closes its database connection after every sweep: a new pool process never inherits
a half-done query, a held lock or an open connection.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from celery.signals import worker_ready
from django.conf import settings

log = logging.getLogger(__name__)

_sweeping = threading.Lock()
_name = ""  # this worker's Celery node name, once it is ready


def sweep_once() -> list[int]:
    # Imported here: this module is imported with the task module, before Django is set up.
    from django.db import DatabaseError

    from webapp.alerts.radar import settle_finished_runs
    from webapp.leases import drop_connection, requeue_stale_all
    from webapp.runs.worker_gpus import advertise
    from workers.capacity import capacity

    with _sweeping:
        try:
            if _name:  # what this worker can give a run, for the form's refusals
                advertise(_name, **capacity())
            requeued = requeue_stale_all()  # every kind of leased job (webapp/leases.py)
            settle_finished_runs()  # the live radar's last word on runs that ended
        except DatabaseError as exc:  # unreachable, or not migrated yet: try again next time
            log.warning("stale-run sweep skipped: %s", " ".join(str(exc).split()))
            return []
        finally:
            drop_connection()
    for kind, ids in requeued.items():
        if ids:
            log.warning("queued again %ss whose worker stopped answering: %s", kind, ids)
    return requeued.get("run", [])


def _sweep_forever() -> None:
    while True:
        try:
            sweep_once()
        except Exception:  # a sweep that fails must not end the sweeping
            log.exception("stale-run sweep failed")
        time.sleep(settings.TROUPE_SWEEP_SECONDS)


@worker_ready.connect
def start_sweeping(sender=None, **kwargs) -> None:
    global _name
    _name = getattr(sender, "hostname", "") or ""
    # No fork in the middle of a sweep (see the module's docstring).
    os.register_at_fork(
        before=_sweeping.acquire,
        after_in_parent=_sweeping.release,
        after_in_child=_sweeping.release,
    )
    # A daemon thread: it ends with the worker, and a warm shutdown need not wait for it.
    threading.Thread(target=_sweep_forever, name="stale-run-sweep", daemon=True).start()
