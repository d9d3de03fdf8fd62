"""What the workers can give one run — GPUs, their memory, the host's memory — so the form
and the API refuse a run no worker can train, before it is queued.

The web process never imports torch, so it cannot see a GPU; each worker says what it has
(workers/capacity.py: `TROUPE_WORKER_GPUS`, each GPU's memory from `nvidia-smi`, the host's
memory) in a `WorkerSeen` row, written by its main process at start-up and with every
stale-run sweep (workers/sweep.py, every TROUPE_SWEEP_SECONDS). A worker counts while its
row is younger than `SEEN_SWEEPS` sweeps (a stopped or killed worker drops out by itself).

- Some worker seen: refused, each with a message naming the numbers (`check_capacity`):
  a run whose `world_size` exceeds the largest GPU count (ConfigError on `world_size`);
  `device = cuda` when no worker has a GPU (on `device`); a run whose estimated memory
  (trainer/memory.py) exceeds the largest worker's — on the GPU for a run queued for one,
  on the host for a run trained on the CPU (on `memory`: 100M-token completions once failed
  6 s after queueing with a raw 256 GB allocator message).
- No worker seen (none started yet, or all stopped): the run is accepted, with a warning
  where it needs several GPUs. The queue holds runs until a worker comes, and the worker
  itself refuses a run it cannot train with the same numbers (workers/ranks.py,
  trainer/memory.py's `check_fits`), so nothing hangs silently.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from trainer.config import Config, ConfigError, fit_problem
from trainer.memory import host_fit_problem
from webapp.experiments.models import WorkerSeen

SEEN_SWEEPS = 5  # a worker missing this many sweeps no longer counts
GPUS_ENV = "TROUPE_WORKER_GPUS"


def advertise(
    name: str, gpus: int, gpu_memory_gb: float | None = None, memory_gb: float | None = None
) -> None:
    """Record that worker `name` is up and gives a run up to `gpus` GPUs of `gpu_memory_gb`
    GiB each (None: it has no GPU) and a host of `memory_gb` GiB (None: unknown)."""
    WorkerSeen.objects.update_or_create(
        name=name,
        defaults={
            "gpus": gpus,
            "gpu_memory_gb": gpu_memory_gb,
            "memory_gb": memory_gb,
            "seen": timezone.now(),
        },
    )


def live_workers():
    """The workers seen within the last `SEEN_SWEEPS` sweeps."""
    since = timezone.now() - timedelta(seconds=SEEN_SWEEPS * settings.TROUPE_SWEEP_SECONDS)
    return WorkerSeen.objects.filter(seen__gte=since)


def largest_gpus() -> int | None:
    """The most GPUs a live worker gives one run; None when no worker has been seen lately."""
    return max(live_workers().values_list("gpus", flat=True), default=None)


def check_capacity(configs: list[Config], queue_of) -> list[str]:
    """ConfigError when no live worker can train one of `configs` (`queue_of(config)`: "gpu"
    or "cpu", where it would train): too many GPUs, a GPU where none is, too much memory.
    The warnings to show otherwise."""
    warnings = check_gpus(configs)
    seen = list(live_workers().values("gpu_memory_gb", "memory_gb"))
    if not seen:
        return warnings
    gpu_gb = max((w["gpu_memory_gb"] or 0 for w in seen), default=0)
    host_gb = max((w["memory_gb"] or 0 for w in seen), default=0)
    for config in configs:
        if config.device == "cuda" and not gpu_gb:
            raise ConfigError(
                {
                    "device": "device cuda needs a GPU, but none of the workers has one "
                    "(nvidia-smi finds none on them): choose device cpu or auto, or start a "
                    "worker on a machine with a GPU"
                }
            )
        if queue_of(config) == "gpu" and gpu_gb:
            problem = fit_problem(config, gpu_gb * 2**30)
        elif queue_of(config) == "cpu" and host_gb:
            problem = host_fit_problem(config, host_gb * 2**30)
        else:
            problem = None
        if problem:
            raise ConfigError({"memory": problem})
    return warnings


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
