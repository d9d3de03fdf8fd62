"""Fixtures of this folder: the owner, teammate and staff of tests/people.py, and the live
radar's evaluations run in the test itself where a test reads alerts right after a write."""

import pytest

from tests.people import alice, bob, carol, experiment, run  # noqa: F401
from webapp.celery import app


@pytest.fixture
def radar_inline(settings):
    """The radar's queued evaluation runs at once, in this process: Celery's eager mode runs
    the task body where it is queued, with no window to wait for. The queueing itself waits
    for the write's commit, which a test transaction never does: wrap the write in
    `TestCase.captureOnCommitCallbacks(execute=True)` (tests/webapp/test_alerts.py's `send`).
    A real worker on the radar queue has its own test (test_radar_task.py)."""
    settings.TROUPE_RADAR_MIN_SECONDS = 0
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = False, False
