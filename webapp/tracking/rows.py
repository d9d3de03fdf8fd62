"""Model instances from raw SQL rows, for the look-ups every MLflow request makes.

Each log-batch request finds its token's user and its run; through the ORM each look-up costs
about a millisecond of query compilation, as much as the round trip to PostgreSQL and, with
the run's experiment and MLflow row joined in, more (bench/mlflow_endpoint.py sends ~400 batches).
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


# (model, database) → (attnames, [(column, converters)] a field): finding a field's
# converters costs more than applying them, and every MLflow request builds three models.
_PLANS: dict[tuple[type[Model], str], tuple[list[str], list[tuple[Any, list]]]] = {}


def _plan(model: type[Model]) -> tuple[list[str], list[tuple[Any, list]]]:
    key = (model, connection.alias)
    if key not in _PLANS:
        fields = model._meta.concrete_fields
        steps = []
        for field in fields:
            column = field.cached_col
            steps.append((column, connection.ops.get_db_converters(column)
                          + column.get_db_converters(connection)))  # fmt: skip
        _PLANS[key] = ([f.attname for f in fields], steps)
    return _PLANS[key]


def instance(model: type[Model], values: Sequence[Any]) -> Model:
    """The model instance of one row of `columns(model, …)`."""
    attnames, steps = _plan(model)
    converted = []
    for (column, converters), value in zip(steps, values, strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)
