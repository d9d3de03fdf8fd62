"""The one write path for metric points: store them, then tell the live radar.

Every writer of points (the JSON API, the MLflow store, the workers' reporter) calls
`record_points`, so none can store points the radar never hears of. The metric store's own
`webapp.metrics.write_points` is called from here alone (`tests/webapp/test_one_write_path.py`
reads the source to hold that); the store stays below the radar, which reads it.
"""

from __future__ import annotations

from collections.abc import Iterable

from webapp.alerts.radar import after_points
from webapp.metrics import Point, write_points


def record_points(run_id: int, points: Iterable[Point]) -> int:
    """Store the points of one run (`write_points`: a (key, step) given again overwrites)
    and ask the radar for an evaluation once the caller's transaction commits, when a key
    it reads is among them. Returns how many distinct (key, step) pairs were stored."""
    points = list(points)
    if not points:
        return 0
    written = write_points(run_id, points)
    after_points(run_id, {key for key, _, _ in points})
    return written
