"""A SECRET_KEY generated once per data directory, for deployments that do not set one.

`make run` must work on a fresh machine with no configuration, yet sessions must survive a
restart, so the key is written to the data directory on first use and read back afterwards.
"""

import os
import secrets
import tempfile
from pathlib import Path


def load_or_create(path: Path) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write to a private temporary file, then link it into place: os.link fails if another
        # process (a second gunicorn worker, a Celery worker) won the race, and then we read
        # its key instead of overwriting it, so every process ends up with the same key.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(50))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    return path.read_text().strip()
