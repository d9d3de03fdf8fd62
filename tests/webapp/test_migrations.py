"""`manage.py migrate` builds the schema from nothing, on PostgreSQL and on SQLite, in a fresh
process as a deployment would; and the models have no change without a migration."""

import sqlite3
import subprocess
import sys

import psycopg

from tests.helpers import ROOT, service_env


def manage(*args: str, **variables: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=service_env(**variables),
        capture_output=True,
        text=True,
    )


def test_migrate_builds_the_schema_on_postgres(postgres_database, tmp_path):
    env = {"DATABASE_URL": postgres_database, "TROUPE_DATA_DIR": str(tmp_path)}

    result = manage("migrate", "--no-input", **env)

    assert result.returncode == 0, result.stderr
    with psycopg.connect(postgres_database) as conn:
        tables = {row[0] for row in conn.execute("SELECT tablename FROM pg_tables")}
    assert {"django_migrations", "auth_user", "django_session"} <= tables
    assert manage("migrate", "--check", **env).returncode == 0


def test_migrate_builds_the_schema_on_the_embedded_sqlite(tmp_path):
    env = {"DATABASE_URL": None, "TROUPE_DATA_DIR": str(tmp_path)}

    result = manage("migrate", "--no-input", **env)

    assert result.returncode == 0, result.stderr
    with sqlite3.connect(tmp_path / "troupe.sqlite3") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert {"django_migrations", "auth_user", "django_session"} <= tables
    assert journal_mode == "wal"
    assert manage("migrate", "--check", **env).returncode == 0


def test_every_model_change_has_a_migration(tmp_path):
    result = manage(
        "makemigrations", "--check", "--dry-run", DATABASE_URL=None, TROUPE_DATA_DIR=str(tmp_path)
    )

    assert result.returncode == 0, result.stdout + result.stderr
