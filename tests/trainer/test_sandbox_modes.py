"""The sandbox as deployments without full privileges get it, run for real: the whole sandbox
(host side included) in a process that is a non-root uid, or root without CAP_SYS_ADMIN (a
default Docker container). tests/trainer/sandbox_probe.py tries the attacks in that process;
each test checks which layers held and that the attacks they stop failed.

Needs root here (to drop to those modes with setpriv); skips, saying why, where it is not.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.timeout(120)

NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]
NO_SYS_ADMIN = ["--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]


def setpriv(options: list[str], *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", *options, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)},
        timeout=100,
    )


def interpreter_for(options: list[str]) -> str:
    """An interpreter the dropped process can run and import the repository with: ours, or
    the system's when ours lives where that uid cannot go (pyenv under /root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged mode")
    for python in (sys.executable, "/usr/bin/python3"):
        # The sandbox starts its supervisor with sys.executable: that must be runnable too.
        check = "import os, sys, trainer.tasks.sandbox; assert os.access(sys.executable, os.X_OK)"
        if setpriv(options, python, "-c", check).returncode == 0:
            return python
    pytest.skip("no interpreter that this uid can run and import the repository with")


@pytest.fixture
def port():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def probe(options: list[str], port: int) -> dict:
    python = interpreter_for(options)
    done = setpriv(options, python, "tests/trainer/sandbox_probe.py", str(port))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def user_namespaces_for(options: list[str]) -> bool:
    return setpriv(options, "unshare", "--user", "--map-root-user", "true").returncode == 0


def cgroups_writable() -> bool:
    from trainer.tasks import _supervisor

    return _supervisor.find_memory_cgroup() is not None


def test_as_a_non_root_user(port):
    report = probe(NOBODY, port)
    layers = set(report["layers"])
    assert "uid" not in layers and "memcg" not in layers  # both need root
    assert "seccomp" in layers
    # The verdict is the checker's in every mode.
    assert report["forged_pass"] == "failed"
    assert report["equals_all"] == "failed"
    assert report["solution"] == "passed"
    assert report["memfd"] == "1"  # EPERM
    if user_namespaces_for(NOBODY):
        assert layers == {"rlimits", "pid", "net", "ipc", "mount", "seccomp", "userns"}
        assert report["ipc"] == ["made", "nothing"]
        assert report["network"] != "connected"
        assert report["policy"] == "scores"
    else:
        assert layers == {"rlimits", "seccomp"}
        assert report["policy"].startswith("refuses")


def test_as_root_without_cap_sys_admin(port):
    report = probe(NO_SYS_ADMIN, port)
    expected = {"uid", "rlimits", "seccomp"} | ({"memcg"} if cgroups_writable() else set())
    assert set(report["layers"]) == expected  # no namespaces without CAP_SYS_ADMIN
    assert report["forged_pass"] == "failed"
    assert report["equals_all"] == "failed"
    assert report["solution"] == "passed"
    assert report["memfd"] == "1"
    # No IPC namespace: the supervisor removes what the sandbox uid made after each job.
    assert report["ipc"] == ["made", "nothing"]
    # Without namespaces it is below the default minimum: code tasks refuse to score.
    assert report["policy"].startswith("refuses")
    assert "pid, net, ipc, mount" in report["policy"]
