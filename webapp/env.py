"""Typed readers for the environment variables that configure Troupe.

Each reader returns the default when the variable is unset (or empty) and raises `EnvError`
with one line naming the variable and the bad value otherwise, so a typo in a deployment fails
at start-up instead of surfacing later as a strange behaviour.
"""

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


class EnvError(ImproperlyConfigured):
    """An environment variable holds a value Troupe cannot use."""


def _raw(name: str) -> str | None:
    # An empty value counts as unset: `FOO=` in an .env file means "use the default".
    value = os.environ.get(name, "").strip()
    return value or None


def env_str(name: str, default: str) -> str:
    return _raw(name) or default


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise EnvError(f"{name}={value!r} is not a boolean: use true or false.")


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise EnvError(f"{name}={value!r} is not an integer.") from None
    if minimum is not None and number < minimum:
        raise EnvError(f"{name}={value!r} is too small: use {minimum} or more.")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks around items and empty items are dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def parse_database_url(url: str, name: str = "DATABASE_URL") -> dict:
    """A Django DATABASES entry for a postgres://, postgresql:// or sqlite:/// URL.

    `sqlite:///relative/path` and `sqlite:////absolute/path` follow the usual convention:
    everything after the third slash is the path. Query parameters of a Postgres URL
    (sslmode=require, …) become connection options.
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = unquote(parts.path[1:])
        if parts.netloc or not path:
            raise EnvError(
                f"{name}={redact_url(url)!r} has no file path: use sqlite:///path/to/file.sqlite3."
            )
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path}

    if parts.scheme not in ("postgres", "postgresql"):
        raise EnvError(
            f"{name}={redact_url(url)!r} is not supported: use postgres://user:password@host:5432/"
            "database or sqlite:///path."
        )
    database = unquote(parts.path.lstrip("/"))
    try:
        port = parts.port
    except ValueError:
        raise EnvError(f"{name}={redact_url(url)!r} has a port that is not a number.") from None
    if not parts.hostname or not database:
        raise EnvError(
            f"{name}={redact_url(url)!r} needs a host and a database name: "
            "postgres://user:password@host:5432/database."
        )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": database,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(port or ""),
        "OPTIONS": dict(parse_qsl(parts.query)),
    }
