"""How many GPUs the workers can give one run, so the form and the API refuse a run no worker
can train (one run over several GPUs).

The web process never imports torch, so it cannot count GPUs; each worker says how many it
gives a run (`TROUPE_WORKER_GPUS`, workers/ranks.py) in a `WorkerSeen` row, written by its
main process at start-up and with every stale-run sweep (workers/sweep.py, every
TROUPE_SWEEP_SECONDS). A worker counts while its row is younger than `SEEN_SWEEPS` sweeps (a
stopped or killed worker drops out by itself).

- Some worker seen: a run whose `world_size` exceeds the largest count is refused with a
  message naming both numbers (ConfigError on `world_size`).
- No worker seen (none started yet, or all stopped): the run is accepted with a warning. The
  queue holds runs until a worker comes, and the worker itself refuses a run it cannot train
  with the same numbers (workers/ranks.py), so nothing hangs silently.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from trainer.config import Config, ConfigError
from webapp.experiments.models import WorkerSeen

SEEN_SWEEPS = 5  # a worker missing this many sweeps no longer counts
GPUS_ENV = "TROUPE_WORKER_GPUS"


def advertise(name: str, gpus: int) -> None:
    """Record that worker `name` is up and gives a run up to `gpus` GPUs."""
    WorkerSeen.objects.update_or_create(name=name, defaults={"gpus": gpus, "seen": timezone.now()})


def largest_gpus() -> int | None:
    """The most GPUs a live worker gives one run; None when no worker has been seen lately."""
    since = timezone.now() - timedelta(seconds=SEEN_SWEEPS * settings.TROUPE_SWEEP_SECONDS)
    counts = WorkerSeen.objects.filter(seen__gte=since).values_list("gpus", flat=True)
    return max(counts, default=None)


def check_gpus(configs: list[Config]) -> list[str]:
    """ConfigError on `world_size` when a run needs more GPUs than any live worker has;
    otherwise the warnings to show (none, or that no worker has said yet)."""
    needed = max((c.world_size for c in configs), default=1)
    if needed <= 1:
        return []
    most = largest_gpus()
    if most is None:
        return [
            f"No worker has reported its GPUs yet: the run needs {needed} GPUs (world_size "
            f"{needed}); a worker started with fewer ({GPUS_ENV}) will refuse it."
        ]
    if needed > most:
        raise ConfigError(
            {
                "world_size": f"the run needs {needed} GPUs (world_size {needed}) but the "
                f"largest worker has {most} ({GPUS_ENV}); lower world_size or start a worker "
                f"with {GPUS_ENV}={needed} or more"
            }
        )
    return []
