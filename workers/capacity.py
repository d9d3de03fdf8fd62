"""What this worker can give a run, advertised with every sweep (`workers/sweep.py`) so that
the form and the API refuse at submit what no worker can train (webapp/runs/worker_gpus.py):

- `gpus`: how many GPUs it gives one run (`TROUPE_WORKER_GPUS`, workers/ranks.py);
- `gpu_memory_gb`: the smallest of its GPUs' memory, asked of `nvidia-smi` — the worker's
  main process never initialises CUDA (a forked pool process could not use it then), so it
  does not ask torch; None when there is no NVIDIA GPU (or no driver): it trains on the CPU;
- `memory_gb`: the host's memory, which a CPU run's model, optimizer and rollout live in.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from workers.ranks import worker_gpus

NVIDIA_SMI_SECONDS = 10  # a driver that hangs must not stop the sweep


def gpu_memory_gb() -> float | None:
    """The smallest visible GPU's memory in GiB; None when there is no NVIDIA GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sizes = [float(line) for line in done.stdout.split() if line.replace(".", "", 1).isdecimal()]
    if done.returncode != 0 or not sizes:
        return None
    return min(sizes) / 1024  # nvidia-smi says MiB


def host_memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):  # not a POSIX system that says
        return None


def capacity() -> dict[str, float | int | None]:
    return {"gpus": worker_gpus(), "gpu_memory_gb": gpu_memory_gb(), "memory_gb": host_memory_gb()}
