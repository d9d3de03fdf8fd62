"""The raw-SQL look-ups every API and MLflow request makes: a token with its user, and a run
with its experiment and MLflow row. Through the ORM each costs about a millisecond of query
compilation, as much as the round trip to PostgreSQL (an MLflow client's run sends hundreds
of batches), so each is one hand-written SELECT whose row becomes model instances here,
converted as the ORM converts them (the backend's converters first — SQLite's datetimes
become aware ones — then the field's own, JSON fields decoded): the same objects the ORM
would return on either database. The SQL and the row mapping stay in this module; callers
get models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model

from webapp.experiments.models import ApiToken, Experiment, Run
from webapp.tracking.models import TrackedRun


def token_and_user(digest: str) -> tuple[ApiToken, Any] | None:
    """The API token whose SHA-256 is `digest` and its user (active or not); None when no
    token has it."""
    user_model = get_user_model()
    sql = (
        f"SELECT {_columns(ApiToken, 't')}, {_columns(user_model, 'u')} "
        f"FROM {ApiToken._meta.db_table} t JOIN {user_model._meta.db_table} u "
        "ON u.id = t.user_id WHERE t.digest = %s"
    )
    row = _fetch_one(sql, digest)
    if row is None:
        return None
    n_token = _width(ApiToken)
    return _instance(ApiToken, row[:n_token]), _instance(user_model, row[n_token:])


def run_by_id(run_id: int) -> Run | None:
    """The run numbered `run_id` with `experiment` and (when it has one) `tracked` loaded:
    what `Run.objects.select_related("experiment", "tracked")` returns."""
    return _run_where("r.id = %s", run_id)


def run_by_uuid(uuid: str) -> Run | None:
    """The run whose MLflow row has `uuid`, loaded as `run_by_id` loads it."""
    return _run_where("t.uuid = %s", uuid)


def _run_where(where: str, value: int | str) -> Run | None:
    sql = (
        f"SELECT {_columns(Run, 'r')}, {_columns(Experiment, 'e')}, "
        f"{_columns(TrackedRun, 't')} FROM {Run._meta.db_table} r "
        f"JOIN {Experiment._meta.db_table} e ON e.id = r.experiment_id "
        f"LEFT JOIN {TrackedRun._meta.db_table} t ON t.run_id = r.id WHERE {where}"
    )
    row = _fetch_one(sql, value)
    if row is None:
        return None
    n_run, n_experiment = _width(Run), _width(Experiment)
    run = _instance(Run, row[:n_run])
    run.experiment = _instance(Experiment, row[n_run : n_run + n_experiment])
    tracked = row[n_run + n_experiment :]
    if tracked[0] is not None:  # its primary key: NULL when the run has no MLflow row
        run.tracked = _instance(TrackedRun, tracked)
    return run


def _fetch_one(sql: str, value: Any) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, [value])
        return cursor.fetchone()


def _columns(model: type[Model], alias: str) -> str:
    """`alias.col, …` of the model's concrete fields, in `_instance`'s order."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


def _width(model: type[Model]) -> int:
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
            converters = connection.ops.get_db_converters(column)
            steps.append((column, converters + column.get_db_converters(connection)))
        _PLANS[key] = ([f.attname for f in fields], steps)
    return _PLANS[key]


def _instance(model: type[Model], values: Sequence[Any]) -> Model:
    """The model instance of one row of `_columns(model, …)`."""
    attnames, steps = _plan(model)
    converted = []
    for (column, converters), value in zip(steps, values, strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)
