"""The one bearer-token authenticator, shared by the JSON API and the MLflow endpoint.

Both read `Authorization: Bearer <token>`, find the token by its SHA-256 and its user in one
raw query (`webapp/tracking/rows.py`: every MLflow request makes it, and the ORM's query
compilation would cost as much as the round trip), and note when the token was last used at
most once a minute, since ingestion sends many requests a second. That query is the request's
first, so it also stands in for Django's per-request connection health check
(`CONN_HEALTH_CHECKS`, a `SELECT 1` round trip of its own): see `_first_query`. Each caller
words the errors in its own protocol's shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from webapp.experiments.models import ApiToken, hash_token
from webapp.tracking import rows

LAST_USED_EVERY = timedelta(minutes=1)


class MalformedHeader(Exception):
    """The Authorization header is not `Bearer <token>`."""


class InvalidToken(Exception):
    """No such token (revoked or mistyped), or its user is off."""


class Rider:
    """A look-up sent in the token's own query, joined to its row, so that a request needing
    it (an MLflow artifact upload: its run) makes one round trip for both: `columns` to
    select, `joins` (LEFT JOINs, whose `params` come before the token's), and `parse`, which
    makes `result` of the row's tail. `key` says what it looked up."""

    def __init__(self, key: str, columns: str, joins: str, params: list,
                 parse: Callable[[Sequence[Any]], Any]):  # fmt: skip
        self.key, self.columns, self.joins, self.params, self.parse = (
            key, columns, joins, params, parse
        )  # fmt: skip
        self.done = False
        self.result: Any = None


def bearer_user(header: str | None, rider: Rider | None = None):
    """The active user of the token in `header`; None when there is no header at all. With a
    `rider`, its look-up rides along in the same query (its `result`, once `done`)."""
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise MalformedHeader("The Authorization header must be 'Bearer <token>'.")
    user_model = get_user_model()
    sql = (
        f"SELECT {rows.columns(ApiToken, 't')}, {rows.columns(user_model, 'u')}"
        f"{', ' + rider.columns if rider else ''} "
        f"FROM {ApiToken._meta.db_table} t JOIN {user_model._meta.db_table} u "
        f"ON u.id = t.user_id {rider.joins if rider else ''} WHERE t.digest = %s"
    )
    row = _first_query(sql, [*(rider.params if rider else ()), hash_token(raw.strip())])
    if row is None:
        raise InvalidToken("This API token is not valid (revoked, mistyped, or its user is off).")
    n_token = rows.width(ApiToken)
    n_user = rows.width(user_model)
    token = rows.instance(ApiToken, row[:n_token])
    user = rows.instance(user_model, row[n_token : n_token + n_user])
    if not user.is_active:
        raise InvalidToken("This API token is not valid (revoked, mistyped, or its user is off).")
    now = timezone.now()
    if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
        ApiToken.objects.filter(id=token.id).update(last_used=now)
    if rider is not None:
        rider.result, rider.done = rider.parse(row[n_token + n_user :]), True
    return user


def _first_query(sql: str, params: list):
    """One row of a read-only query that opens the request's use of the database. Where
    Django would first check a reused connection with a `SELECT 1` (`CONN_HEALTH_CHECKS`),
    this query is the check: on a connection the server dropped (a restart, an idle
    timeout) it fails before anything is read or written, and is sent once more on a new
    connection, as Django's check would have reconnected. A request then costs one round
    trip less (an MLflow upload makes three)."""
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
            cursor.execute(sql, params)
            return cursor.fetchone()
    except (OperationalError, InterfaceError):
        if not checking or connection.is_usable():
            raise  # not a dropped connection: a real error
        connection.close()
    with connection.cursor() as cursor:  # a new connection, healthy by definition
        cursor.execute(sql, params)
        return cursor.fetchone()
