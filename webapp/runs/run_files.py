"""What deleted runs leave on disk, removed once their rows are gone.

A worker trains run N in `$TROUPE_DATA_DIR/runs/N/` (its config, metrics and checkpoints:
gigabytes for a full fine-tune of a 4B model), and each branching freezes the checkpoint it
starts from under `$TROUPE_DATA_DIR/branch-points/run-N-<random>/` (`branching.py`). The web
server and the workers share that directory (the compose file's `troupe-data` volume), so the
process that deletes the rows removes the files: `delete_runs(queryset)` deletes the runs
(their points, logs and alerts cascade) and, after the transaction commits, their run
directories and each branch point that was theirs or that they started from, once no
remaining run starts from it (a child keeps its frozen checkpoint while it exists, even if
its parent is deleted; the last child deleted takes it along).

Only what the deleted runs own is removed, whatever a stored `init_from` says: a folder
directly in `runs/` named by a deleted run's id, and a branch point directly in
`branch-points/` laid out as `checkpoint_refs.freeze` makes it (real paths compared, links
never followed), never the data directory or anything above a run's folder.

A file that cannot be removed is logged, never raised: the rows are gone either way, and a
leftover directory is harmless (a worker starting a fresh run clears its directory first).
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from webapp.experiments.models import Run
from webapp.runs.checkpoint_refs import BRANCH_POINTS

log = logging.getLogger(__name__)
_POINT = re.compile(r"^run-\d+-[0-9a-f]+$")  # what `checkpoint_refs.freeze` names a point


def delete_runs(runs: QuerySet[Run]) -> list[int]:
    """Delete `runs` (with what cascades) and, after commit, their files; their ids."""
    with transaction.atomic():
        rows = list(runs.values_list("id", "config__init_from"))
        runs.delete()
        run_ids = [run_id for run_id, _ in rows]
        starts = [init_from for _, init_from in rows if init_from]
        transaction.on_commit(lambda: remove_run_files(run_ids, starts))
    return run_ids


def _branch_point_of(init_from: str, home: Path) -> Path | None:
    """The branch point folder a deleted run started from, when `init_from` names a checkpoint
    inside one exactly as `freeze` lays it out (<home>/run-<id>-<hex>/checkpoints/<name>);
    None for anything else, whatever `..`, links or absolute paths it holds."""
    if not isinstance(init_from, str) or "\0" in init_from or ".." in Path(init_from).parts:
        return None
    start = home.parent / init_from  # stored relative to the data directory (older: absolute)
    point = start.parent.parent
    if start.parent.name != "checkpoints" or not _POINT.match(point.name):
        return None
    return point if _directly_in(point, home) else None


def _directly_in(path: Path, parent: Path) -> bool:
    """Whether `path` is a real folder (not a link) whose real path is directly in `parent`'s."""
    try:
        return not path.is_symlink() and path.is_dir() and path.resolve().parent == parent.resolve()
    except (OSError, ValueError):  # a name too long for the disk, a NUL
        return False


def remove_run_files(run_ids: list[int], starts: list[str] = ()) -> None:
    """Remove the run directories of `run_ids`, and the branch points that were theirs or that
    the deleted runs started from (`starts`: their `init_from`s) once no run names them.
    Only folders directly in `runs/` and `branch-points/` are ever removed (real paths)."""
    data = Path(settings.DATA_DIR)
    home = data / BRANCH_POINTS
    points = {
        point
        for run_id in run_ids
        for point in home.glob(f"run-{int(run_id)}-*")
        if _POINT.match(point.name) and _directly_in(point, home)
    }
    # A child's own branch point (named after its parent) goes with the last child using it.
    points |= {point for p in starts if (point := _branch_point_of(p, home)) is not None}
    for run_id in run_ids:
        folder = data / "runs" / str(int(run_id))
        if _directly_in(folder, data / "runs"):
            _remove(folder)
    for point in sorted(points):
        named = Q(config__init_from__startswith=f"{BRANCH_POINTS}/{point.name}/")
        if not Run.objects.filter(named | Q(config__init_from__startswith=f"{point}/")).exists():
            _remove(point)


def _remove(path: Path) -> None:
    def report(function, name, exc_info):
        log.warning("could not remove %s of a deleted run: %s", name, exc_info[1])

    shutil.rmtree(path, onerror=report)  # never follows a link inside it
