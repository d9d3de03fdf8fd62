"""Fixtures of this folder: the owner, teammate and staff of tests/people.py, and a radar
throttle that starts empty in every test."""

import pytest

from tests.people import alice, bob, carol, experiment, run  # noqa: F401
from webapp.experiments import alerts


@pytest.fixture(autouse=True)
def fresh_radar_throttle():
    """The radar judges a run at most every TROUPE_RADAR_MIN_SECONDS in one process, keyed by
    run id. SQLite hands a rolled-back test's ids out again (PostgreSQL's sequences never go
    back), so a run could inherit a previous test's "evaluated just now" and skip its
    evaluation: forget every earlier test's evaluations."""
    with alerts._lock:
        alerts._last.clear()
    yield
