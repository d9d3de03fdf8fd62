"""The typed environment readers of webapp/env.py, in-process."""

import pytest

from webapp.env import EnvError, env_bool, env_int, env_list, env_str, parse_database_url


def test_unset_and_empty_variables_give_the_default(monkeypatch):
    monkeypatch.delenv("TROUPE_X", raising=False)
    assert env_str("TROUPE_X", "d") == "d"
    monkeypatch.setenv("TROUPE_X", "  ")
    assert env_bool("TROUPE_X", True) is True
    assert env_int("TROUPE_X", 7) == 7
    assert env_list("TROUPE_X", ["a"]) == ["a"]


@pytest.mark.parametrize("word", ["1", "true", "True", "YES", "on"])
def test_env_bool_reads_true_words(monkeypatch, word):
    monkeypatch.setenv("TROUPE_X", word)
    assert env_bool("TROUPE_X", False) is True


@pytest.mark.parametrize("word", ["0", "false", "No", "off"])
def test_env_bool_reads_false_words(monkeypatch, word):
    monkeypatch.setenv("TROUPE_X", word)
    assert env_bool("TROUPE_X", True) is False


def test_env_int_checks_the_minimum(monkeypatch):
    monkeypatch.setenv("TROUPE_X", "59")
    with pytest.raises(EnvError, match=r"^TROUPE_X='59' is too small: use 60 or more\.$"):
        env_int("TROUPE_X", 100, minimum=60)


def test_env_list_drops_blanks(monkeypatch):
    monkeypatch.setenv("TROUPE_X", " a, ,b ,")
    assert env_list("TROUPE_X", []) == ["a", "b"]


def test_sqlite_urls_follow_the_three_and_four_slash_convention():
    assert parse_database_url("sqlite:///rel/db.sqlite3")["NAME"] == "rel/db.sqlite3"
    assert parse_database_url("sqlite:////abs/db.sqlite3")["NAME"] == "/abs/db.sqlite3"


def test_postgresql_scheme_and_default_port():
    db = parse_database_url("postgresql://postgres@127.0.0.1/postgres")
    assert (db["ENGINE"], db["HOST"], db["PORT"], db["PASSWORD"]) == (
        "django.db.backends.postgresql",
        "127.0.0.1",
        "",
        "",
    )


def test_errors_name_the_variable_they_were_read_from():
    with pytest.raises(EnvError, match=r"^TEST_DB='redis://x' is not supported"):
        parse_database_url("redis://x", name="TEST_DB")


def test_gunicorn_reads_its_worker_counts_with_the_typed_helper(monkeypatch):
    import importlib

    import webapp.gunicorn_conf as conf

    monkeypatch.setenv("TROUPE_WEB_WORKERS", "3")
    monkeypatch.setenv("TROUPE_WEB_THREADS", "4")
    assert (importlib.reload(conf).workers, conf.threads) == (3, 4)
    monkeypatch.setenv("TROUPE_WEB_THREADS", "0")
    with pytest.raises(EnvError, match="TROUPE_WEB_THREADS"):
        importlib.reload(conf)
    monkeypatch.delenv("TROUPE_WEB_WORKERS")
    monkeypatch.delenv("TROUPE_WEB_THREADS")
    importlib.reload(conf)
