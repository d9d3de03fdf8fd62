"""webapp/settings.py reads every variable of .env.example, and a bad value stops start-up
with one line naming it.

Settings are module-level code, so each case imports them in a fresh process with the
environment under test.
"""

import json
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT, free_port, service_env

VARIABLES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CELERY_VISIBILITY_TIMEOUT",
    "TROUPE_BROKER_PREFIX",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "TROUPE_DATA_DIR",
)
SHOWN = (
    "DATA_DIR",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "DATABASES",
    "CELERY_BROKER_URL",
    "CELERY_BROKER_TRANSPORT_OPTIONS",
    "CELERY_RESULT_BACKEND",
)


def clean_env(tmp_path, **variables: str) -> dict[str, str]:
    """The test process's environment without Troupe's variables, plus `variables`."""
    env = service_env(**dict.fromkeys(VARIABLES))
    env["TROUPE_DATA_DIR"] = str(tmp_path)
    return {**env, **variables}


def load_settings(tmp_path, **variables: str) -> dict:
    script = (
        "import json, webapp.settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {SHOWN!r}}}, default=str))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=clean_env(tmp_path, **variables),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def manage(tmp_path, *args: str, **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean_env(tmp_path, **variables),
        capture_output=True,
        text=True,
    )


def test_with_no_variables_it_runs_on_sqlite_and_the_filesystem_broker(tmp_path):
    s = load_settings(tmp_path)

    db = s["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == str(tmp_path / "troupe.sqlite3")
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert db["OPTIONS"]["timeout"] > 0
    assert s["CELERY_BROKER_URL"].startswith("filesystem://")
    options = s["CELERY_BROKER_TRANSPORT_OPTIONS"]
    assert options["data_folder_in"] == options["data_folder_out"] == str(tmp_path / "broker/queue")
    assert options["processed_folder"] == str(tmp_path / "broker/processed")
    assert (tmp_path / "broker/queue").is_dir()
    assert s["CELERY_RESULT_BACKEND"] == f"file://{tmp_path / 'results'}"
    assert s["DEBUG"] is False
    assert s["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]


def test_without_secret_key_one_is_generated_once_and_kept_in_the_data_dir(tmp_path):
    first = load_settings(tmp_path)["SECRET_KEY"]
    second = load_settings(tmp_path)["SECRET_KEY"]

    assert len(first) >= 50
    assert first == second == (tmp_path / "secret_key").read_text().strip()


def test_database_url_switches_to_postgres(tmp_path):
    s = load_settings(
        tmp_path, DATABASE_URL="postgres://troupe:p%40ss@db.example:6543/runs?sslmode=require"
    )

    db = s["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"]) == ("runs", "troupe", "p@ss")
    assert (db["HOST"], db["PORT"]) == ("db.example", "6543")
    assert db["OPTIONS"] == {
        "sslmode": "require",
        "connect_timeout": 5,
        "prepare_threshold": 2**31 - 1,  # only the statements that ask are prepared
    }
    assert 0 < db["CONN_MAX_AGE"] <= 300


def test_database_url_may_name_a_sqlite_file(tmp_path):
    s = load_settings(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/elsewhere.db")

    db = s["DATABASES"]["default"]
    assert db["NAME"] == f"{tmp_path}/elsewhere.db"
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_a_redis_broker_brings_the_redis_result_backend_and_the_visibility_timeout(tmp_path):
    s = load_settings(tmp_path, CELERY_BROKER_URL="redis://cache:6379/2")
    assert s["CELERY_BROKER_URL"] == s["CELERY_RESULT_BACKEND"] == "redis://cache:6379/2"
    assert s["CELERY_BROKER_TRANSPORT_OPTIONS"] == {"visibility_timeout": 48 * 3600}

    s = load_settings(
        tmp_path, CELERY_BROKER_URL="redis://cache:6379/2", CELERY_VISIBILITY_TIMEOUT="7200"
    )
    assert s["CELERY_BROKER_TRANSPORT_OPTIONS"] == {"visibility_timeout": 7200}


def test_a_broker_prefix_keeps_every_redis_key_apart(tmp_path):
    s = load_settings(
        tmp_path, CELERY_BROKER_URL="redis://cache:6379/2", TROUPE_BROKER_PREFIX="session-7:"
    )
    assert s["CELERY_BROKER_TRANSPORT_OPTIONS"]["global_keyprefix"] == "session-7:"


def test_debug_secret_key_and_allowed_hosts_come_from_the_environment(tmp_path):
    s = load_settings(
        tmp_path, DEBUG="true", SECRET_KEY="k" * 50, ALLOWED_HOSTS=" troupe.lab , 10.0.0.5,"
    )

    assert s["DEBUG"] is True
    assert s["SECRET_KEY"] == "k" * 50
    assert s["ALLOWED_HOSTS"] == ["troupe.lab", "10.0.0.5"]
    assert not (tmp_path / "secret_key").exists()


def test_troupe_data_dir_holds_the_embedded_database_and_broker(tmp_path):
    s = load_settings(tmp_path, TROUPE_DATA_DIR=str(tmp_path / "elsewhere"))

    assert s["DATA_DIR"] == str(tmp_path / "elsewhere")
    assert s["DATABASES"]["default"]["NAME"] == str(tmp_path / "elsewhere/troupe.sqlite3")
    assert (tmp_path / "elsewhere/broker/queue").is_dir()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean: use true or false."),
        ("CELERY_VISIBILITY_TIMEOUT", "2 days", "CELERY_VISIBILITY_TIMEOUT='2 days' is not an"),
        ("CELERY_VISIBILITY_TIMEOUT", "10", "CELERY_VISIBILITY_TIMEOUT='10' is too small"),
        ("DATABASE_URL", "mysql://db/troupe", "DATABASE_URL='mysql://db/troupe' is not supp"),
        ("DATABASE_URL", "postgres://db.example", "DATABASE_URL='postgres://db.example' needs"),
        ("DATABASE_URL", "postgres://u:hunter2@db:port/x", "DATABASE_URL='postgres://u:***@db:"),
        ("DATABASE_URL", "sqlite://", "DATABASE_URL='sqlite://' has no file path"),
        ("CELERY_BROKER_URL", "amqp://mq//", "CELERY_BROKER_URL='amqp://mq//' is not supported"),
    ],
)
def test_a_bad_value_stops_start_up_with_one_line_naming_it(tmp_path, variable, value, message):
    result = manage(tmp_path, "check", **{variable: value})

    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {message}")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "hunter2" not in result.stderr


def test_an_unreachable_database_is_one_line_naming_database_url(tmp_path):
    url = f"postgres://troupe:hunter2@127.0.0.1:{free_port()}/troupe"

    result = manage(tmp_path, "migrate", DATABASE_URL=url)

    assert result.returncode == 1
    assert result.stderr.startswith(
        f"Error: Cannot connect to the database at DATABASE_URL={url.replace('hunter2', '***')}: "
    )
    assert "Connection refused" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_every_variable_the_settings_read_is_listed_in_env_example():
    read = set(re.findall(r'env_\w+\(\s*"(\w+)"', (ROOT / "webapp/settings.py").read_text()))
    listed = set(re.findall(r"^(\w+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))

    assert read and read <= listed, f"missing from .env.example: {sorted(read - listed)}"
