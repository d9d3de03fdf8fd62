"""A worker's run on several GPUs: the pool process is rank 0, the other ranks its children.

`train_run` (workers/execute.py) calls `ranks(config, out)` for a run whose `world_size` is
above 1. Rank 0 stays in the pool process, so the database reporter, its heartbeats and the
cancel check keep working as for any run; ranks 1…N−1 are `python -m workers.ranks` children
(trainer only: no Django), rendezvous on a free local port (what torchrun's `--standalone`
does), each on GPU `LOCAL_RANK` of the worker's visible ones. A child is killed by the kernel
when the pool process dies (`PR_SET_PDEATHSIG`), so a worker killed with -9 leaves no orphan
rank: the sweep requeues its run, which resumes from its checkpoint elsewhere. A child that
dies (killed, out of memory) makes rank 0's next collective fail, within
`TROUPE_DIST_TIMEOUT` at most, with `RankLost`: the worker then treats the run as a lost
worker's (workers/execute.py), and the sweep queues it again to resume from its checkpoint
(up to `TROUPE_MAX_ATTEMPTS`). Each rank's output is in `rank-<r>.log` in the run directory.
On the way out, however it ends, rank 0 waits for its children a few seconds, then kills them.

The worker's GPU count is `TROUPE_WORKER_GPUS` (default 1). A run needing more is refused
with a message naming both numbers, before anything starts. The worker also advertises the
count in the database (workers/sweep.py), so the form and the API refuse such a run before
it is queued when a live worker is known (webapp/runs/worker_gpus.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

GPUS_ENV = "TROUPE_WORKER_GPUS"
_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")


class RankLost(RuntimeError):
    """A child rank exited while the run was training: the run should resume, not fail."""


def worker_gpus() -> int:
    """How many GPUs this worker may give one run (`TROUPE_WORKER_GPUS`, default 1)."""
    return int(os.environ.get(GPUS_ENV, "1"))


def gpu_problem(world_size: int, gpus: int | None = None) -> str | None:
    """Why this worker cannot train a run of `world_size` ranks; None when it can."""
    gpus = worker_gpus() if gpus is None else gpus
    if world_size <= gpus:
        return None
    return (
        f"the run needs {world_size} GPUs (world_size {world_size}) but this worker has "
        f"{gpus} ({GPUS_ENV}); run it on a worker started with {GPUS_ENV}={world_size} or more"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PARENT_ENV = "TROUPE_RANK_PARENT"


def _die_with_parent() -> None:
    """In a child rank: have the kernel SIGKILL it when its parent dies (Linux), and stop at
    once if the parent is already gone (it died before the request was made)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(os.environ.get(PARENT_ENV, os.getppid())):
        os._exit(1)


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


DEATH_GRACE_SECONDS = 10.0


def _a_dead_child(children, grace: float = DEATH_GRACE_SECONDS):
    """(rank, exit status, log) of a child that ended badly, waiting up to `grace` seconds
    for one; None when all are still running (or ended cleanly) after that.

    The wait matters: a killed child's sockets close before the kernel lets its parent reap
    it, so rank 0 can see the broken collective while `poll()` still says "running".
    """
    deadline = time.monotonic() + grace
    while True:
        for rank, child, log in children:
            if child.poll() not in (None, 0):
                return rank, child.returncode, log
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


@contextlib.contextmanager
def ranks(config, out: Path) -> Iterator:
    """Start ranks 1…N−1 of the run in `out` and join them as rank 0; yields the `World`."""
    from trainer.distributed import World
    from trainer.models import resolve_device
    from trainer.train import prepare_out_dir

    prepare_out_dir(config, out)  # config.json, which the children read
    size = config.world_size
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "WORLD_SIZE": str(size),
        PARENT_ENV: str(os.getpid()),
    }
    saved = {k: os.environ.get(k) for k in (*_RENDEZVOUS, PARENT_ENV)}
    children: list[tuple[int, subprocess.Popen, Path]] = []
    world = None
    try:
        for rank in range(1, size):
            log = out / f"rank-{rank}.log"
            with log.open("w") as fh:
                child = subprocess.Popen(
                    [sys.executable, "-m", "workers.ranks", str(out)],
                    env={**os.environ, **env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                )
            children.append((rank, child, log))
        os.environ.update({**env, "RANK": "0", "LOCAL_RANK": "0"})
        world = World.start(size, resolve_device(config.device))
        try:
            yield world
        except Exception as exc:
            if dead := _a_dead_child(children):
                rank, code, log = dead
                raise RankLost(
                    f"rank {rank} of {size} exited with status {code}"
                    + (f"; its log ends: {tail}" if (tail := log_tail(log, 3)) else "")
                ) from exc
            raise
    finally:
        if world is not None:
            with contextlib.suppress(Exception):
                world.close()
        for _, child, _ in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(out: str) -> int:
    """Rank ≥ 1 of a worker's run: the config is the run directory's config.json (rank 0
    wrote it before starting this process)."""
    _die_with_parent()
    from trainer.config import config_from_dict
    from trainer.train import train

    config = config_from_dict(json.loads((Path(out) / "config.json").read_text()))
    result = train(config, out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
