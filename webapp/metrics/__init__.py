"""One store for metric points, their step times and the keys of a run (`store.py`), and
the hand-written look-ups every API and MLflow request makes (`lookups.py`: a token with its
user, a run with its experiment and MLflow row).

Every module that reads or writes the metric table goes through these functions; the
SQL is in `webapp/metrics/` alone, and the only split by database is `dialect.py`. The
tables beside the metric points are the store's own (`models.py`), which makes this package a
Django app; Django imports it before any model may load, so the store's functions are loaded
on their first use here rather than when the package is.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webapp.metrics.store import (
        Point,
        Series,
        delete_points_from,
        delete_series,
        finite_or_none,
        history_json,
        latest_points,
        latest_values,
        latest_with_times,
        load_new_points,
        matching_series,
        metric_keys,
        read_runs_series,
        read_series,
        selected_series,
        series_of,
        signatures,
        stored_keys,
        values_at,
        write_point_times,
        write_points,
        write_signs,
        write_step_times,
    )

__all__ = [
    "Point",
    "Series",
    "delete_points_from",
    "delete_series",
    "finite_or_none",
    "history_json",
    "latest_points",
    "latest_values",
    "latest_with_times",
    "load_new_points",
    "matching_series",
    "metric_keys",
    "read_runs_series",
    "read_series",
    "selected_series",
    "series_of",
    "signatures",
    "stored_keys",
    "values_at",
    "write_point_times",
    "write_points",
    "write_signs",
    "write_step_times",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module("webapp.metrics.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
