"""What deleted runs leave on disk, removed once their rows are gone.

A worker trains run N in `$TROUPE_DATA_DIR/runs/N/` (its config, metrics and checkpoints:
gigabytes for a full fine-tune of a 4B model), and each branching freezes the checkpoint it
starts from under `$TROUPE_DATA_DIR/branch-points/run-N-<random>/` (`branching.py`). The web
server and the workers share that directory (the compose file's `troupe-data` volume), so the
process that deletes the rows removes the files: `delete_runs(queryset)` deletes the runs
(their points, logs and alerts cascade) and, after the transaction commits, their run
directories and each of their branch points that no remaining run starts from (a child keeps
its frozen checkpoint while it exists, even if its parent is deleted).

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
        run_ids = list(runs.values_list("id", flat=True))
        runs.delete()
        transaction.on_commit(lambda: remove_run_files(run_ids))
    return run_ids


def remove_run_files(run_ids: list[int]) -> None:
    data = Path(settings.DATA_DIR)
    for run_id in run_ids:
        _remove(data / "runs" / str(run_id))
        for point in sorted((data / "branch-points").glob(f"run-{run_id}-*")):
            if not Run.objects.filter(config__init_from__startswith=f"{point}/").exists():
                _remove(point)


def _remove(path: Path) -> None:
    def report(function, name, exc_info):
        log.warning("could not remove %s of a deleted run: %s", name, exc_info[1])

    if path.is_dir():
        shutil.rmtree(path, onerror=report)
