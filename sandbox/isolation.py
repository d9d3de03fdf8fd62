"""The minimum isolation for scoring: which layers the sandbox gives on this machine (one
probe run, cached) and whether they hold what TROUPE_SANDBOX_MIN_ISOLATION requires.
"""

from __future__ import annotations

import logging
import os

from sandbox.host import run_program

LAYERS = ("uid", "rlimits", "pid", "net", "ipc", "mount", "memcg", "seccomp", "userns", "landlock")
# What code tasks need by default: what the compose workers and a non-root host with user
# namespaces both give. Neither `uid` (needs root) nor `memcg` (needs a writable memory
# cgroup) is in it; require them with TROUPE_SANDBOX_MIN_ISOLATION where the host has them.
DEFAULT_MIN_ISOLATION = ("rlimits", "pid", "net", "ipc", "mount", "seccomp")
# Needed whatever TROUPE_SANDBOX_MIN_ISOLATION says, unless TROUPE_SANDBOX_ALLOW_WEAK=1 opts
# in: without a private root the program's working directory is a host temporary directory
# and it reads world-readable host files, which no lowered minimum should allow silently.
ALWAYS_REQUIRED = ("mount",)
# Needed even then: one of these keeps every write of the program inside its job. Without
# them a program wrote 66 files named like standard modules (json.py, sitecustomize.py, a
# .pth) into the host's /tmp and /var/tmp, where any Python process could run them.
WRITES_CONFINED_BY = ("mount", "landlock")
# What a program can do where a layer is missing: the refusal says it, so that whoever opts
# in knows what they accept.
MISSING_MEANS = {
    "uid": "the program shares a uid with other processes and can signal or trace them",
    "rlimits": "nothing caps its CPU time, memory, file sizes or descriptors",
    "pid": "it sees the host's processes, and what it leaves running outlives it",
    "net": "it can open network connections (only the Python guard refuses them)",
    "ipc": "its System V objects and POSIX queues are the host's",
    "mount": "its working directory is a private, emptied directory in the host's /tmp (with "
    "landlock the only place it may write: files up to disk_mb each, in all unbounded), and "
    "it reads world-readable host files",
    "memcg": "kernel memory it holds is not counted against memory_mb",
    "seccomp": "it can create kernel objects no limit bounds (memfd, shared memory, timers)",
    "userns": "the namespaces above cannot be made without root",
    "landlock": "without mount, it writes anywhere the host lets its uid write: the host's "
    "/tmp and /var/tmp, where a file named like a module runs in other Python processes",
}
MIN_ISOLATION_ENV = "TROUPE_SANDBOX_MIN_ISOLATION"
ALLOW_WEAK_ENV = "TROUPE_SANDBOX_ALLOW_WEAK"


class SandboxTooWeak(RuntimeError):
    """The sandbox on this machine lacks layers that the configured minimum requires."""


def required_layers(environ: dict | None = None) -> tuple[str, ...]:
    """The minimum from TROUPE_SANDBOX_MIN_ISOLATION (comma-separated layer names; "none":
    nothing), else DEFAULT_MIN_ISOLATION."""
    environ = os.environ if environ is None else environ
    text = environ.get(MIN_ISOLATION_ENV)
    if text is None or not text.strip():
        return DEFAULT_MIN_ISOLATION
    if text.strip().lower() == "none":
        return ()
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in LAYERS]
    if unknown:
        raise ValueError(
            f"{MIN_ISOLATION_ENV} names unknown layers {', '.join(unknown)}; "
            f"known: {', '.join(LAYERS)}"
        )
    return names


def weak_allowed(environ: dict | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(ALLOW_WEAK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


_probed: tuple[str, ...] | None = None
_warned: set[tuple[str, ...]] = set()


def available_layers(refresh: bool = False) -> tuple[str, ...]:
    """The layers a sandboxed program gets on this machine (one probe run, then cached)."""
    global _probed
    if _probed is None or refresh:
        result = run_program("pass", timeout=10.0)
        if result.status != "passed":
            raise SandboxTooWeak(f"the sandbox cannot run a program here: {result.stderr[-500:]}")
        _probed = result.isolation
    return _probed


def require_isolation(environ: dict | None = None) -> tuple[str, ...]:
    """Raise SandboxTooWeak unless the sandbox holds the configured minimum (or
    TROUPE_SANDBOX_ALLOW_WEAK=1 allows less) and, in any case, confines the program's writes
    to its job (`WRITES_CONFINED_BY`); returns the layers in force."""
    layers = available_layers()
    needed = dict.fromkeys((*required_layers(environ), *ALWAYS_REQUIRED))
    missing = [n for n in needed if n not in layers]
    if not any(n in layers for n in WRITES_CONFINED_BY):
        raise SandboxTooWeak(
            f"the code sandbox here keeps no program's writes inside its job (neither "
            f"{' nor '.join(WRITES_CONFINED_BY)} is in force; in force: "
            f"{', '.join(layers) or 'none'}): {MISSING_MEANS['landlock']}. Code tasks do not "
            f"score here, {ALLOW_WEAK_ENV} or not: run the worker as root with CAP_SYS_ADMIN, "
            "with user namespaces, or on a kernel with Landlock (Linux 5.13+)."
        )
    if missing and weak_allowed(environ):
        if tuple(missing) not in _warned:
            _warned.add(tuple(missing))
            logging.getLogger(__name__).warning(
                "code sandbox below its minimum (missing %s); scoring anyway: %s=1",
                ", ".join(missing),
                ALLOW_WEAK_ENV,
            )
    elif missing:
        means = "; ".join(f"without {n}, {MISSING_MEANS[n]}" for n in missing)
        raise SandboxTooWeak(
            f"the code sandbox here lacks the isolation layer(s) {', '.join(missing)} that "
            f"{MIN_ISOLATION_ENV} requires (in force: {', '.join(layers) or 'none'}): {means}. "
            "Run the worker as root with CAP_SYS_ADMIN (see docker-compose.yml) or with user "
            f"namespaces, lower {MIN_ISOLATION_ENV} (the mount layer is needed whatever it "
            f"says), or set {ALLOW_WEAK_ENV}=1 to accept this and score anyway."
        )
    return layers
