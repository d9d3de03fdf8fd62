"""`make run`, the README's first command, on a copy of the working tree: it serves the login
page, and a stop signal ends it cleanly with nothing left running.

The copy reuses this checkout's virtual environment (VENV=…), so nothing is reinstalled.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import ROOT, descendants, free_port, is_alive, service_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The files git would commit (tracked or not ignored), copied: nothing is committed yet,
    and a copy keeps .venv, .data and build output of this checkout out of the test."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copy = tmp_path_factory.mktemp("checkout")
    for name in filter(None, listing.split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    return copy


def wait_for_banner(process: subprocess.Popen, log: Path, timeout: float = 90) -> str:
    """Wait until `make run` says it is running (it does so once it serves the login page)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = log.read_text()
        if "Press Ctrl-C to stop." in output:
            return output
        assert process.poll() is None, f"make run exited with {process.returncode}:\n{output}"
        time.sleep(0.2)
    raise AssertionError(f"make run did not say it was running within {timeout} s")


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def run_pid(make_pid: int) -> int:
    """The pid of scripts/run.py below `make`."""
    for pid in descendants(make_pid):
        try:
            if b"scripts/run.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    raise AssertionError("scripts/run.py is not running under make")


@pytest.fixture(params=["embedded", "postgres+redis"])
def services(request, tmp_path) -> dict[str, str | None]:
    """The variables of each way to run: nothing set, or PostgreSQL (a throwaway database) and
    Redis."""
    if request.param == "embedded":
        return {"DATABASE_URL": None, "CELERY_BROKER_URL": None}
    return {
        "DATABASE_URL": request.getfixturevalue("postgres_database"),
        "CELERY_BROKER_URL": request.getfixturevalue("redis_url"),
    }


def test_make_run_serves_the_login_page_and_stops_cleanly(checkout, services, tmp_path):
    port = free_port()
    env = service_env(
        **services,
        # Run as from a terminal, not as a sub-make of `make test` (which would add
        # "Entering directory" lines and pass its flags down).
        MAKEFLAGS=None,
        MAKELEVEL=None,
        MFLAGS=None,
        VENV=str(ROOT / ".venv"),
        PYTHON3=sys.executable,
        PORT=str(port),
        TROUPE_DATA_DIR=str(tmp_path / "data"),
    )
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "run"],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # A session of its own: the test can signal it as a terminal would, and nothing it
            # starts can outlive the test unnoticed.
            start_new_session=True,
            # As from a terminal, Ctrl-C must reach make even when this test runs in the
            # background of a non-interactive shell, which starts it with SIGINT ignored (an
            # ignored signal stays ignored across exec, and make then never sees Ctrl-C).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        banner = wait_for_banner(process, log)
        assert f"Troupe is running at http://127.0.0.1:{port}/" in banner
        status, html = get(f"http://127.0.0.1:{port}/accounts/login/")
        assert status == 200 and 'id="login-form"' in html
        assert get(f"http://127.0.0.1:{port}/static/troupe.css")[0] == 200
        running = descendants(process.pid)

        if services["DATABASE_URL"] is None:
            # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
            os.killpg(process.pid, signal.SIGINT)
        else:
            # A service manager: SIGTERM to the program itself.
            os.kill(run_pid(process.pid), signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    output = log.read_text()
    login = (tmp_path / "data/login.txt").read_text()
    assert f"with password {login.split('password: ')[1].strip()}" in output
    assert output.rstrip().endswith("Troupe stopped."), output[-2000:]
    # make re-raises a SIGINT it received itself; otherwise it passes on run.py's status.
    assert process.returncode == (-signal.SIGINT if services["DATABASE_URL"] is None else 0)
    assert len(running) >= 5, "expected make, run.py, gunicorn and its workers, and celery"
    assert not [pid for pid in running if is_alive(pid)], "processes left running"
