#!/usr/bin/env python
"""Django's command-line entry point for Troupe.

Configuration mistakes (a bad environment variable, a database that does not answer) end with
one line on stderr naming the variable, not with a traceback.
"""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from webapp.checks import database_problem
    from webapp.env import EnvError

    try:
        execute_from_command_line(sys.argv)
    except EnvError as exc:
        sys.exit(f"Error: {exc}")
    except OperationalError:
        # Also raised for problems that are not about reaching the server (a missing table,
        # a lock): only a failed connection gets the one-line treatment.
        problem = database_problem()
        if problem is None:
            raise
        sys.exit(f"Error: {problem}")


if __name__ == "__main__":
    main()
