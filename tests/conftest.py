"""Fixtures shared by every test: the real services and a real Celery worker; and the
`any_database` marker on the tests that never reach the session's database.

Services are found where CI puts them (DATABASE_URL / CELERY_BROKER_URL when they name
Postgres / Redis, else the usual local addresses; tests/default_services.py sets those
variables to the local services before the settings load when they are unset and the services
answer). A missing service skips the test, or fails it when TROUPE_REQUIRE_SERVICES=1 — see
tests/helpers.py.
"""

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
import redis
from django.conf import settings

from tests.default_services import CHROMIUM, LOCAL_POSTGRES, LOCAL_REDIS
from tests.helpers import Worker, database_url, require_service, service_env, start_worker

# The fixtures through which a test reaches the session's database: every database fixture of
# pytest-django depends on django_db_setup (so do celery_worker and the run fixtures), and
# live_server asks for transactional_db only while it starts.
SESSION_DATABASE_FIXTURES = frozenset({"django_db_setup", "live_server"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `any_database` each test that cannot reach the session's database: no django_db
    marker and none of its fixtures (pytest-django refuses database access to such a test).
    Whatever the session's database, it does the same, so CI's SQLite leg deselects it as a
    repeat (`-m 'not any_database'`). First, so that `-m` sees the marker."""
    for item in items:
        if item.get_closest_marker("django_db") is None and not (
            SESSION_DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.any_database)


# No test may download a model; tests/trainer/test_hub_download.py lifts this for its own
# fake Hub on 127.0.0.1. Workers the tests start inherit it.
os.environ.setdefault("TROUPE_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def broker_prefix() -> Iterator[str]:
    """This session's own Redis keys (queues included): test sessions of several developers
    sharing one Redis never take each other's tasks. Workers and clients the tests start
    inherit it through the environment (TROUPE_BROKER_PREFIX, read by webapp/settings.py);
    this process's Celery app is told directly, as its settings are already loaded."""
    prefix = f"troupe-test-{os.getpid()}:"
    os.environ["TROUPE_BROKER_PREFIX"] = prefix
    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        from webapp.celery import app

        app.conf.broker_transport_options = {
            **app.conf.broker_transport_options,
            "global_keyprefix": prefix,
        }
    yield prefix
    url = os.environ.get("CELERY_BROKER_URL", "")
    try:  # leave nothing behind in a Redis that outlives the session
        client = redis.Redis.from_url(
            url if url.startswith("redis") else LOCAL_REDIS, socket_timeout=3
        )
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
    except redis.RedisError:
        pass


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A Postgres URL whose user may create databases."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = LOCAL_POSTGRES
    require_service("PostgreSQL", lambda: psycopg.connect(url, connect_timeout=3).close())
    return url


@pytest.fixture
def postgres_database(postgres_url) -> Iterator[str]:
    """The URL of a new, empty database on the test server, dropped afterwards."""
    name = f"troupe_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield urlsplit(postgres_url)._replace(path=f"/{name}").geturl()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith(("redis://", "rediss://")):
        url = LOCAL_REDIS
    require_service("Redis", lambda: redis.Redis.from_url(url, socket_timeout=3).ping())
    return url


@pytest.fixture(scope="session")
def chromium_path() -> str:
    def probe() -> None:
        if not os.access(CHROMIUM, os.X_OK):
            raise FileNotFoundError(f"{CHROMIUM} is missing (apt-get install chromium)")

    require_service("Chromium", probe)
    return CHROMIUM


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """pytest-django's hook before it creates the test database: a test database of this
    session's own, so that test sessions running at the same time (several developers, one
    server) never drop each other's. On SQLite it is a file rather than Django's in-memory
    default: a Celery worker started by a test is another process and must see the same data.
    """
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(tmp_path_factory.mktemp("db") / "test.sqlite3")
    else:
        name = f"test_{db['NAME']}_{os.getpid()}"
    db.setdefault("TEST", {})["NAME"] = name


@pytest.fixture
def celery_worker(django_db_setup) -> Iterator[Worker]:
    """A real worker wired to this test session: its database (the test database) and its
    broker, so that tasks the test enqueues (`some_task.delay(...)`) reach it.

    The worker is another process: tests that make it read or write the database must use
    `transactional_db` (or `@pytest.mark.django_db(transaction=True)`), so that their rows
    are committed where it can see them.
    """
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    with start_worker(env) as worker:
        yield worker
