"""The sandbox as deployments without full privileges get it, run for real: the whole sandbox
(host side included) in a process that is a non-root uid, or root without CAP_SYS_ADMIN (a
default Docker container). tests/sandbox/sandbox_probe.py tries the attacks in that process;
each test checks which layers held and that the attacks they stop failed.

Non-root runs as uid 65534 and as uid 1000: an earlier bug mapped the ids of the user
namespace right only for 65534 (the overflow uid), and every other uid lost its private root.

Needs root here (to drop to those modes with setpriv); skips, saying why, where it is not
(fails instead under TROUPE_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT, require_service
from tests.sandbox.code_attacks import ATTACKS
from tests.sandbox.sandbox_probe import KERNEL_OBJECTS_REFUSED

pytestmark = pytest.mark.timeout(240)
ATTACKS_FAIL = {name: [0.0, 1.0] for name in ATTACKS}  # wrong program 0, right one 1.0

NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]
USER = ["--reuid=1000", "--regid=1000", "--clear-groups"]  # any uid but the overflow uid
NO_SYS_ADMIN = ["--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]


def setpriv(options: list[str], *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", *options, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)},
        timeout=200,
    )


def interpreter_for(options: list[str]) -> str:
    """An interpreter the dropped process can run and import the repository with: ours, or
    the system's when ours lives where that uid cannot go (pyenv under /root)."""

    def can_drop() -> None:
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            raise PermissionError("needs root and setpriv to drop to an unprivileged mode")

    require_service("dropping privileges with setpriv", can_drop)
    found = []

    def runnable() -> None:
        for python in (sys.executable, "/usr/bin/python3"):
            # The sandbox starts its supervisor with sys.executable: that must be runnable too.
            check = "import os, sys, sandbox; assert os.access(sys.executable, os.X_OK)"
            if setpriv(options, python, "-c", check).returncode == 0:
                found.append(python)
                return
        raise LookupError("no interpreter that this uid can run and import the repository with")

    require_service("an interpreter for the dropped uid", runnable)
    return found[0]


@pytest.fixture
def port():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def outside(tmp_path_factory):
    """A host file, made writable by any uid below, that programs must neither read, change
    nor delete."""
    folder = tmp_path_factory.mktemp("outside")
    folder.chmod(0o777)
    path = folder / "sentinel.txt"
    path.write_text("original")
    path.chmod(0o666)
    return path


def probe(options: list[str], port: int, outside) -> dict:
    python = interpreter_for(options)
    done = setpriv(options, python, "tests/sandbox/sandbox_probe.py", str(port), str(outside))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def user_namespaces_for(options: list[str]) -> bool:
    return setpriv(options, "unshare", "--user", "--map-root-user", "true").returncode == 0


def cgroups_writable() -> bool:
    from sandbox import cgroups

    return cgroups.find_memory_cgroup() is not None


@pytest.mark.parametrize("user", [NOBODY, USER], ids=["uid 65534", "uid 1000"])
def test_as_a_non_root_user(port, outside, user):
    report = probe(user, port, outside)
    layers = set(report["layers"])
    assert "uid" not in layers and "memcg" not in layers  # both need root
    assert "seccomp" in layers
    # The verdict is the checker's in every mode.
    assert report["forged_pass"] == "failed"
    assert report["equals_all"] == "failed"
    assert report["solution"] == "passed"
    assert report["memfd"] == "1"  # EPERM
    assert report["ipc"] == ["refused", "nothing"]  # System V objects: seccomp refuses them
    assert report["semaphores"] == ["0 1", "-1 1", ""]  # EPERM: no kernel memory to pile up
    assert report["memory_reader"] == ["failed", "failed"]  # no expected value in its memory
    assert report["discovery"] == ["failed"] * 3  # nothing of the program runs in the checker
    assert report["kernel_objects"] == KERNEL_OBJECTS_REFUSED
    assert report["page_tables"] == ["memory", ""]  # stopped before its 30,000 mappings
    assert report["planted"]["left"] == []  # nothing of the program's on the host
    if user_namespaces_for(user):
        assert layers == {"rlimits", "pid", "net", "ipc", "mount", "seccomp", "userns"}
        # Its private root: the host file is not there to read, change or delete.
        assert report["outside"] == ["FileNotFoundError"] * 3
        assert outside.read_text() == "original"
        assert report["network"] != "connected"
        assert report["policy"] == report["lowered_policy"] == "scores"
        assert report["attacks"] == ATTACKS_FAIL
    else:
        assert layers == {"rlimits", "seccomp", "landlock"}
        assert report["policy"].startswith("refuses")
        assert report["lowered_policy"].startswith("refuses")
        assert report["planted"]["outside"] == ["PermissionError"] * 12
        assert report["attacks"] == ATTACKS_FAIL
    assert report["opted_in_policy"] == "scores"


def test_as_root_without_cap_sys_admin(port, outside):
    report = probe(NO_SYS_ADMIN, port, outside)
    expected = {"uid", "rlimits", "seccomp", "landlock"}
    expected |= {"memcg"} if cgroups_writable() else set()
    assert set(report["layers"]) == expected  # no namespaces without CAP_SYS_ADMIN
    assert report["forged_pass"] == "failed"
    assert report["equals_all"] == "failed"
    assert report["solution"] == "passed"
    assert report["memfd"] == "1"
    # No IPC namespace, but seccomp refuses System V objects (and the supervisor would
    # remove what the sandbox uid made after each job).
    assert report["ipc"] == ["refused", "nothing"]
    assert report["semaphores"] == ["0 1", "-1 1", ""]
    assert report["memory_reader"] == ["failed", "failed"]
    assert report["discovery"] == ["failed"] * 3  # nothing of the program runs in the checker
    assert report["kernel_objects"] == KERNEL_OBJECTS_REFUSED
    assert report["page_tables"] == ["memory", ""]  # stopped before its 30,000 mappings
    # A host file of another uid (0o666): neither changed nor deleted.
    assert report["outside"][1:] == ["PermissionError"] * 2
    assert outside.read_text() == "original"
    # Files named like modules, planted in the host's /tmp, /var/tmp and /dev/shm: refused;
    # its own private, emptied directory takes them.
    assert report["planted"] == {
        "outside": ["PermissionError"] * 12,
        "own": ["written"] * 4,
        "left": [],
    }
    # Each wrong program of the code attacks scores 0, each right one 1.0 (opted in).
    assert report["attacks"] == ATTACKS_FAIL
    # Without namespaces it is below the default minimum: code tasks refuse to score.
    assert report["policy"].startswith("refuses")
    assert "pid, net, ipc, mount" in report["policy"]
    # Without `mount`, a program here works in a host temporary directory and reads host
    # files, so even a lowered minimum refuses, saying why, unless the operator opts in.
    assert "without mount, its working directory is a private" in report["lowered_policy"]
    assert report["opted_in_policy"] == "scores"
