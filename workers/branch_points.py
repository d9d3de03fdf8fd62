"""Where a run the worker trains may start from: only a branch point the web server froze.

The web server turns a `RUN:NAME` reference into a frozen copy of that checkpoint under
`$TROUPE_DATA_DIR/branch-points/` and stores it as the run's `init_from`, relative to the data
directory (`branch-points/run-7-1a2b3c4d/checkpoints/best-000030`:
webapp/runs/checkpoint_refs.py), so no config shown to a user names a folder of the server.
Here it is joined to this worker's data directory; a row from before stores the absolute
path, which joins to itself. A stored `init_from` that names anything else (a row written
before that rule, or by hand) is refused before the trainer opens it: a worker reads no
checkpoint-shaped folder elsewhere on its disk for a web user (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

BRANCH_POINTS = "branch-points"  # as webapp/runs/checkpoint_refs.py names the folder


def check_init_from(init_from: str) -> str:
    """The folder `init_from` names, for the trainer ("" when empty); ValueError unless it is
    a folder inside this data directory's branch points (real paths: no `..` nor link leads
    out of it)."""
    if not init_from:
        return ""
    home = (Path(settings.DATA_DIR) / BRANCH_POINTS).resolve()
    path = Path(settings.DATA_DIR) / init_from  # an absolute init_from stays itself
    try:
        inside = ".." not in path.parts and path.resolve().is_relative_to(home)
    except (OSError, ValueError):  # a NUL, a name too long for the disk
        inside = False
    if not inside or path.resolve() == home:
        raise ValueError(
            "init_from names no branch point of this server: a run starts only from a "
            "checkpoint the server froze for it (RUN:NAME, e.g. 7:best, on the web)"
        )
    return str(path)
