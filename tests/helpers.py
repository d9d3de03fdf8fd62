"""Helpers for tests that need real services and real processes.

- `require_service(name, probe)`: skip a test when a service is missing, or fail it when
  TROUPE_REQUIRE_SERVICES=1 (as CI sets), so CI never passes by skipping.
- `start_worker(env)`: a real Celery worker subprocess, handed over once it answers through
  its broker, stopped at the end; `Worker.kill()` kills it as the OOM killer would.
- `service_env(...)`, `database_url(...)`, `descendants(pid)`, `free_port()`: the small pieces
  those need.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from webapp.env import env_bool

ROOT = Path(__file__).resolve().parent.parent


def require_service(name: str, probe: Callable[[], object]) -> None:
    """Run `probe`; if it raises, the service is missing: skip, or fail when required."""
    try:
        probe()
    except Exception as exc:  # any failure of the probe means "not available"
        reason = " ".join(str(exc).split()) or type(exc).__name__
        message = f"{name} is not available: {reason}"
        if env_bool("TROUPE_REQUIRE_SERVICES", False):
            pytest.fail(f"{message} (TROUPE_REQUIRE_SERVICES is set)", pytrace=False)
        pytest.skip(message)


def service_env(**overrides: str | None) -> dict[str, str]:
    """This process's environment with `overrides`; None removes a variable."""
    env = dict(os.environ)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for a Django DATABASES entry (after test set-up, the test database)."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{auth}{settings_dict['HOST']}{port}/{settings_dict['NAME']}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """The processes below `pid` (children, grandchildren, …), read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # The command name is in parentheses and may hold spaces; the parent pid follows it.
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def is_alive(pid: int) -> bool:
    """True for a running process; False for one that is gone or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Worker:
    """A Celery worker subprocess started by `start_worker`."""

    def __init__(self, process: subprocess.Popen, name: str, env: dict[str, str], log: Path):
        self.process = process
        self.name = name  # the node name, e.g. troupe-test-1a2b3c4d@host: what ping replies
        self.env = env
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def assert_running(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(
                f"worker exited with {self.process.returncode}:\n{self.log_tail()}"
            )

    def answers_control_ping(self, timeout: float = 1.0) -> bool:
        """Whether the worker's main process answers Celery's remote-control ping; it does
        even while its pool process runs a task."""
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "webapp",
                "inspect",
                "ping",
                "--destination",
                self.name,
                "--timeout",
                str(timeout),
            ],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
        )
        return result.returncode == 0

    def ping(self, timeout: float = 30, queue: str = "cpu") -> dict:
        """Send the ping task through this worker's broker (from a separate client process
        with the worker's environment) and return the reply; AssertionError on no answer."""
        client = subprocess.Popen(
            [sys.executable, "-m", "workers.ping", "--timeout", str(timeout), "--queue", queue],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Watch the worker while waiting, so that a worker that dies is reported at once with
        # its log, not as a timeout.
        while client.poll() is None:
            try:
                self.assert_running()
            except AssertionError:
                client.kill()
                client.wait()
                raise
            time.sleep(0.1)
        stdout, stderr = client.communicate()
        if client.returncode != 0:
            raise AssertionError(f"ping failed: {stderr.strip()}\nworker log:\n{self.log_tail()}")
        return json.loads(stdout)

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once, as a crash or the OOM killer
        would: nothing gets to clean up."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL whatever is left of its process group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def start_worker(
    env: dict[str, str], queues: str = "cpu,gpu", ready_timeout: float = 60, pool: str = "prefork"
) -> Iterator[Worker]:
    """Start `celery -A webapp worker` with `env`, wait until it answers Celery's
    remote-control ping through its broker, hand it over, and stop it on exit.

    Readiness uses the control ping, answered by the worker's main process, rather than the
    `ping` task: with worker_max_tasks_per_child=1 a task would use up the first pool process,
    and the test's own first task would wait seconds for its replacement.
    """
    name = f"troupe-test-{uuid.uuid4().hex[:8]}@%h"
    fd, log_name = tempfile.mkstemp(prefix="celery-worker-", suffix=".log")
    os.close(fd)
    log = Path(log_name)
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "webapp",
                "worker",
                "--pool",
                pool,
                "--concurrency",
                "1",
                "--queues",
                queues,
                "--hostname",
                name,
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own process group, so that stop() and kill() reach the pool processes too.
            start_new_session=True,
        )
    worker = Worker(process, name.replace("%h", socket.gethostname()), env, log)
    try:
        deadline = time.monotonic() + ready_timeout
        # The log line first (cheap to poll), then the answer through the broker.
        while f"{worker.name} ready." not in log.read_text(errors="replace"):
            worker.assert_running()
            assert time.monotonic() < deadline, f"worker not ready:\n{worker.log_tail()}"
            time.sleep(0.1)
        while not worker.answers_control_ping():
            worker.assert_running()
            assert time.monotonic() < deadline, f"worker does not answer:\n{worker.log_tail()}"
        yield worker
    finally:
        worker.stop()
        log.unlink(missing_ok=True)


def start_radar_worker(env: dict[str, str], ready_timeout: float = 60):
    """A worker on the live radar's queue, as `make run` and the compose file start one: the
    radar's evaluations of runs whose points arrive (`webapp/alerts/radar.py`)."""
    return start_worker(env, queues="radar", ready_timeout=ready_timeout, pool="solo")
