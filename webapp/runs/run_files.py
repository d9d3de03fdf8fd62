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

A file that cannot be removed is logged, never raised: the rows are gone either way, and a
leftover directory is harmless (a worker starting a fresh run clears its directory first).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from webapp.experiments.models import Run

log = logging.getLogger(__name__)


def delete_runs(runs: QuerySet[Run]) -> list[int]:
    """Delete `runs` (with what cascades) and, after commit, their files; their ids."""
    with transaction.atomic():
        rows = list(runs.values_list("id", "config__init_from"))
        runs.delete()
        run_ids = [run_id for run_id, _ in rows]
        starts = [init_from for _, init_from in rows if init_from]
        transaction.on_commit(lambda: remove_run_files(run_ids, starts))
    return run_ids


def remove_run_files(run_ids: list[int], starts: list[str] = ()) -> None:
    """Remove the run directories of `run_ids`, and the branch points that were theirs or that
    the deleted runs started from (`starts`: their `init_from`s) once no run names them."""
    data = Path(settings.DATA_DIR)
    home = data / "branch-points"
    points = {point for run_id in run_ids for point in home.glob(f"run-{run_id}-*")}
    # A child's own branch point (named after its parent) goes with the last child using it.
    # (`init_from` = <home>/run-<parent>-<random>/checkpoints/<name>; `.parent` never fails.)
    points |= {Path(p).parent.parent for p in starts if Path(p).parent.parent.parent == home}
    for run_id in run_ids:
        _remove(data / "runs" / str(run_id))
    for point in sorted(points):
        if not Run.objects.filter(config__init_from__startswith=f"{point}/").exists():
            _remove(point)


def _remove(path: Path) -> None:
    def report(function, name, exc_info):
        log.warning("could not remove %s of a deleted run: %s", name, exc_info[1])

    if path.is_dir():
        shutil.rmtree(path, onerror=report)
