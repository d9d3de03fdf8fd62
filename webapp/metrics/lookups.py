"""The raw-SQL look-ups every API and MLflow request makes: a token with its user, and a run
with its experiment and MLflow row. Through the ORM each costs about a millisecond of query
compilation, as much as the round trip to PostgreSQL (an MLflow client's run sends hundreds
of batches), so each is one hand-written SELECT whose row becomes model instances here,
converted as the ORM converts them (the backend's converters first — SQLite's datetimes
become aware ones — then the field's own, JSON fields decoded): the same objects the ORM
would return on either database. The SQL and the row mapping stay in this module; callers
get models.

The token's query opens a request's use of the database, so it also stands in for Django's
per-request connection health check (`CONN_HEALTH_CHECKS`, a `SELECT 1` round trip of its
own): see `_first_query`. A request that needs a run too (an MLflow artifact upload: the run
its path names) sends that look-up in the same query as a `Rider`, and makes one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Model

from trainer.config import INT_MAX
from webapp.experiments.models import ApiToken, Experiment, Run, TrackedRun
from webapp.ids import whole_number


class Rider:
    """A look-up sent in the token's own query, joined to its row, so that a request needing
    it makes one round trip for both: `columns` to select, `joins` (LEFT JOINs, whose
    `params` come before the token's), and `parse`, which makes `result` of the row's tail.
    `key` says what it looked up."""

    def __init__(
        self,
        key: str,
        columns: str,
        joins: str,
        params: list,
        parse: Callable[[Sequence[Any]], Any],
    ):
        self.key, self.columns, self.joins, self.params, self.parse = (
            key,
            columns,
            joins,
            params,
            parse,
        )
        self.done = False
        self.result: Any = None


def token_and_user(digest: str, rider: Rider | None = None) -> tuple[ApiToken, Any] | None:
    """The API token whose SHA-256 is `digest` and its user (active or not); None when no
    token has it. With a `rider`, its look-up rides along (its `result`, once `done`)."""
    user_model = get_user_model()
    sql = (
        f"SELECT {_columns(ApiToken, 't')}, {_columns(user_model, 'u')}"
        f"{', ' + rider.columns if rider else ''} "
        f"FROM {ApiToken._meta.db_table} t JOIN {user_model._meta.db_table} u "
        f"ON u.id = t.user_id {rider.joins if rider else ''} WHERE t.digest = %s"
    )
    row = _first_query(sql, [*(rider.params if rider else ()), digest])
    if row is None:
        return None
    n_token, n_user = _width(ApiToken), _width(user_model)
    token = _instance(ApiToken, row[:n_token])
    user = _instance(user_model, row[n_token : n_token + n_user])
    if rider is not None:
        rider.result, rider.done = rider.parse(row[n_token + n_user :]), True
    return token, user


def run_rider(raw_id: str) -> Rider:
    """`run_by_id`'s or `run_by_uuid`'s look-up of the run `raw_id` (a Troupe number or an
    MLflow id), as LEFT JOINs to ride in the request's token query."""
    number = whole_number(raw_id)
    if number is not None and number <= INT_MAX:
        joins, value = f"LEFT JOIN {Run._meta.db_table} rr ON rr.id = %s", number
    else:
        joins = (
            f"LEFT JOIN {TrackedRun._meta.db_table} rq ON rq.uuid = %s "
            f"LEFT JOIN {Run._meta.db_table} rr ON rr.id = rq.run_id"
        )
        value = raw_id
    joins += (
        f" LEFT JOIN {Experiment._meta.db_table} re ON re.id = rr.experiment_id"
        f" LEFT JOIN {TrackedRun._meta.db_table} rt ON rt.run_id = rr.id"
    )
    columns = f"{_columns(Run, 'rr')}, {_columns(Experiment, 're')}, {_columns(TrackedRun, 'rt')}"
    return Rider(raw_id, columns, joins, [value], _run_of_row)


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
    return _run_of_row(_fetch_one(sql, value))


def _run_of_row(row: Sequence[Any] | None) -> Run | None:
    """The run of a row of its, its experiment's and its MLflow row's columns (None: no row,
    or the LEFT JOIN's NULLs of a rider that found no run)."""
    if row is None or row[0] is None:
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
        return _one_row(cursor, sql, [value])


def _one_row(cursor, sql: str, params: list) -> tuple | None:
    """The first row of `sql` on Django's `cursor`. On PostgreSQL a prepared statement: these
    few statements repeat on every request, and planning the token's five-table join cost
    four times running it (0.28 against 0.07 ms). Django's own cursor binds on the client and
    cannot prepare, so a preparing psycopg cursor over the same connection runs it, wrapped as
    Django wraps its own (errors, execute wrappers, the query log); psycopg keeps the
    statement for the connection's life (`CONN_MAX_AGE`)."""
    if connection.vendor != "postgresql":
        cursor.execute(sql, params)
        return cursor.fetchone()
    raw = _PreparingCursor(connection.connection)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as prepared:
        prepared.execute(sql, params)
        return prepared.fetchone()


class _PreparingCursor(psycopg.Cursor):
    """A server-binding cursor that prepares every statement it runs (psycopg prepares only
    past `prepare_threshold`, which settings.py sets out of reach for Django's queries)."""

    def execute(self, query, params=None, *, prepare=True, binary=None):
        return super().execute(query, params, prepare=prepare, binary=binary)


def _first_query(sql: str, params: list) -> tuple | None:
    """One row of a read-only query that opens the request's use of the database. Where
    Django would first check a reused connection with a `SELECT 1` (`CONN_HEALTH_CHECKS`),
    this query is the check: on a connection the server dropped (a restart, an idle
    timeout) it fails before anything is read or written, and is sent once more on a new
    connection, as Django's check would have reconnected. A request then costs one round
    trip less."""
    checking = (
        connection.connection is not None
        and connection.health_check_enabled
        and not connection.health_check_done
        and not connection.in_atomic_block
    )
    if checking:
        connection.health_check_done = True
    try:
        with connection.cursor() as cursor:
            return _one_row(cursor, sql, params)
    except (OperationalError, InterfaceError):
        if not checking or connection.is_usable():
            raise  # not a dropped connection: a real error
        connection.close()
    with connection.cursor() as cursor:  # a new connection, healthy by definition
        return _one_row(cursor, sql, params)


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
