"""Which SQL the metric store speaks: the one place that asks what the database is.

Every operation of the store whose fastest form differs between databases has two
implementations with the same name and signature: `webapp/metrics/postgres.py` (arrays
bound and read in binary, `unnest`, `DISTINCT ON`, `COPY`, a skip scan over the primary
key) and `webapp/metrics/portable.py` (SQL and ORM calls every backend runs: SQLite, the
embedded default). `sql()` picks the module for the connection in use. The store's other
statements are the same on every database and live in `webapp/metrics/store.py`.
"""

from __future__ import annotations

from types import ModuleType

from django.db import connection

from webapp.metrics import portable, postgres


def sql() -> ModuleType:
    """`postgres` on PostgreSQL, `portable` on any other database."""
    return postgres if connection.vendor == "postgresql" else portable
