"""Where a run the worker trains may start from: only a branch point the web server froze.

The web server turns a `RUN:NAME` reference into a frozen copy of that checkpoint under
`$TROUPE_DATA_DIR/branch-points/` and stores its path as the run's `init_from`
(webapp/runs/checkpoint_refs.py). A stored `init_from` that names anything else (a row
written before that rule, or by hand) is refused before the trainer opens it: a worker reads
no checkpoint-shaped folder elsewhere on its disk for a web user (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

BRANCH_POINTS = "branch-points"  # as webapp/runs/checkpoint_refs.py names the folder


def check_init_from(init_from: str) -> None:
    """ValueError unless `init_from` is empty or a folder inside this data directory's
    branch points (real paths: no `..` nor link leads out of it)."""
    if not init_from:
        return
    home = (Path(settings.DATA_DIR) / BRANCH_POINTS).resolve()
    path = Path(init_from)
    try:
        inside = ".." not in path.parts and path.resolve().is_relative_to(home)
    except (OSError, ValueError):  # a NUL, a name too long for the disk
        inside = False
    if not inside or path.resolve() == home:
        raise ValueError(
            "init_from names no branch point of this server: a run starts only from a "
            "checkpoint the server froze for it (RUN:NAME, e.g. 7:best, on the web)"
        )
