"""An MLflow (or JSON API) request's first query, the token's, stands in for Django's
per-request connection health check (`CONN_HEALTH_CHECKS`, a `SELECT 1` round trip of its
own): a request on a healthy reused connection sends no such ping, and one on a connection
the server dropped (a restart) is still answered, on a new connection, as the check would
have had it. PostgreSQL only: SQLite has no server to drop the connection."""

import time

import pytest
from django.db import connection, connections

from tests.people import bearer

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/2.0/mlflow/experiments/get"


def drop_this_connection() -> None:
    """Have the server end this thread's connection, and wait until it has."""
    pid = connection.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            for _ in range(500):
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                if cursor.fetchone()[0] == 0:
                    return
                time.sleep(0.01)
        raise AssertionError("the server never ended the connection")
    finally:
        other.close()


def test_the_token_query_is_the_health_check(client, alice, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("a dropped server connection is PostgreSQL's")
    headers = bearer(alice)
    assert client.get(URL, {"experiment_id": "0"}, headers=headers).status_code == 200
    assert connection.health_check_enabled  # settings.py: CONN_HEALTH_CHECKS on PostgreSQL
    pings = []
    real = connection.is_usable
    monkeypatch.setattr(connection, "is_usable", lambda: pings.append(1) or real())

    # A new request on the reused, healthy connection (Django's request boundary, which the
    # test client leaves out): no ping.
    connection.close_if_unusable_or_obsolete()
    assert client.get(URL, {"experiment_id": "0"}, headers=headers).status_code == 200
    assert pings == []

    # The server drops the connection between two requests: the next is answered all the same.
    connection.close_if_unusable_or_obsolete()
    drop_this_connection()
    response = client.get(URL, {"experiment_id": "0"}, headers=headers)
    assert response.status_code == 200, response.content
    assert response.json()["experiment"]["experiment_id"] == "0"
