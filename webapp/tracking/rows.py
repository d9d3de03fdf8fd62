"""Model instances from raw SQL rows, for the look-ups every MLflow request makes.

Each log-batch request finds its token's user and its run; through the ORM each look-up costs
about a millisecond of query compilation, as much as the round trip to PostgreSQL and, with
the run's experiment and MLflow row joined in, more (issue 12's bench sends ~400 batches).
`columns` names a model's columns for a SELECT and `instance` builds the model from them,
converted as the ORM converts them (the backend's converters first — SQLite's datetimes become
aware ones — then the field's own, JSON fields decoded), so the result is the same object the
ORM would return on either database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model


def columns(model: type[Model], alias: str) -> str:
    """`alias.col, …` of the model's concrete fields, in `instance`'s order."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


def width(model: type[Model]) -> int:
    return len(model._meta.concrete_fields)


def instance(model: type[Model], values: Sequence[Any]) -> Model:
    """The model instance of one row of `columns(model, …)`."""
    fields = model._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        column = field.cached_col
        converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], converted)
