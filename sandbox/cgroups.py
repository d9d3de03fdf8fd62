"""A memory cgroup per job: where one may be made, making it with the job's limit, reading
its OOM kills, and removing it (and those of supervisors killed before they could).
"""

from __future__ import annotations

import os
import time

CGROUP_PREFIX = "troupe-sandbox-"


def find_memory_cgroup() -> tuple[str, str] | None:
    """A directory where we may create one memory cgroup per job, or None.

    cgroup v1: a child of our own memory cgroup. cgroup v2: a sibling of our own cgroup (a
    cgroup with processes may not hand controllers to children), which needs the memory
    controller enabled in the parent. Probed by creating and removing a directory.
    """
    try:
        with open("/proc/self/cgroup") as fh:
            entries = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    candidates = []
    for _, controllers, path in entries:
        if "memory" in controllers.split(","):
            candidates.append(("v1", "/sys/fs/cgroup/memory" + path.rstrip("/")))
    for _, controllers, path in entries:
        if controllers == "" and path != "/":
            candidates.append(("v2", os.path.dirname("/sys/fs/cgroup" + path.rstrip("/"))))
    for kind, parent in candidates:
        remove_stale_cgroups(parent)
        limit = "memory.limit_in_bytes" if kind == "v1" else "memory.max"
        probe = f"{parent}/{CGROUP_PREFIX}probe-{os.getpid()}"
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            ok = os.path.exists(f"{probe}/{limit}") and os.access(f"{probe}/cgroup.procs", os.W_OK)
        finally:
            try:
                os.rmdir(probe)
            except OSError:
                pass
        if ok:
            return kind, parent
    return None


def remove_stale_cgroups(parent: str) -> None:
    """Job cgroups of supervisors that were killed before they could remove them (empty by
    now: their processes died with their init)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(CGROUP_PREFIX):
            continue
        owner = name[len(CGROUP_PREFIX) :].split("-")[0]  # "<supervisor pid>-<job index>"
        if owner.isdecimal() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(f"{parent}/{name}")
            except OSError:
                pass


def write_file(path: str, text: str) -> bool:
    try:
        with open(path, "w") as fh:
            fh.write(text)
        return True
    except OSError:
        return False


def make_job_cgroup(where: tuple[str, str] | None, index: int, memory_mb: int) -> str | None:
    """A memory cgroup capping RAM of everything the job's processes hold: heap, memfd,
    System V and POSIX shared memory, and the files of its tmpfs /tmp. No swap. `where` is
    `find_memory_cgroup()`'s answer (None: no cgroup)."""
    if where is None:
        return None
    kind, parent = where
    path = f"{parent}/{CGROUP_PREFIX}{os.getpid()}-{index}"
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError:
        return None
    limit = str(int(memory_mb) << 20)
    if kind == "v1":
        ok = write_file(f"{path}/memory.limit_in_bytes", limit)
        write_file(f"{path}/memory.memsw.limit_in_bytes", limit)  # where swap is accounted
        write_file(f"{path}/memory.swappiness", "0")
    else:
        ok = write_file(f"{path}/memory.max", limit)
        write_file(f"{path}/memory.swap.max", "0")
        write_file(f"{path}/memory.oom.group", "1")
    if not ok:
        remove_cgroup(path)
        return None
    return path


def cgroup_ooms(path: str | None) -> int:
    """How often the kernel's OOM killer struck in the job's cgroup."""
    if path is None:
        return 0
    for name in ("memory.oom_control", "memory.events"):
        try:
            with open(f"{path}/{name}") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def remove_cgroup(path: str | None) -> None:
    if path is None:
        return
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)  # the last process may still be exiting
