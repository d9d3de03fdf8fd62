"""One-line explanations for a database Troupe cannot reach, used by manage.py and the run
script instead of a psycopg traceback."""

from django.conf import settings
from django.db import OperationalError, connection

from webapp.env import redact_url


def database_problem() -> str | None:
    """None when the default database answers; otherwise one line that names DATABASE_URL."""
    try:
        connection.ensure_connection()
    except OperationalError as exc:
        if settings.DATABASE_URL:
            where = f"DATABASE_URL={redact_url(settings.DATABASE_URL)}"
        else:
            where = f"{settings.DATABASES['default']['NAME']} (DATABASE_URL is unset)"
        reason = " ".join(str(exc).split())
        return f"Cannot connect to the database at {where}: {reason}"
    return None
