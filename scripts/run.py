"""`make run`: the whole of Troupe on one machine, in the foreground.

Migrates the database, collects static files, makes sure the `troupe` login exists, then
starts the web server (gunicorn on 127.0.0.1:$PORT, default 8000) and two Celery workers, and
prints where to sign in. Ctrl-C or SIGTERM stops them all and exits 0; if one dies on its own,
the others are stopped too and the exit status is 1. Either way the runs the training worker
held — and its swap jobs — are queued again (`webapp.leases.hand_back_all`), so the next start
resumes them at once, first, from their
checkpoints rather than after the stale-run sweep's wait.

The worker listens on both run queues, `cpu` and `gpu`, whatever the hardware: on a single
machine there is no other worker, and a run queued for a device nobody listens to would wait
forever. It runs one task at a time (a training run uses every core, or the one GPU). The
radar worker takes the `radar` queue: the live radar's evaluations of runs as their points
arrive (`webapp/alerts/radar.py`), which must not wait for the run being trained.
"""

import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

STOP_GRACE_SECONDS = 15  # how long the web server and the worker get to stop before a SIGKILL
WORKER_NAME = "troupe@%h"  # the training worker's Celery node name (%h: this host's name)
READY_TIMEOUT_SECONDS = 90


def fail(message: str) -> None:
    sys.exit(f"Error: {message}")


def prepare() -> dict[str, str]:
    """Bring the database up to date and return the login to print."""
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from webapp.accounts.management.commands.ensure_login import read_login
    from webapp.checks import database_problem
    from webapp.env import EnvError, redact_url

    try:
        django.setup()
    except EnvError as exc:
        fail(str(exc))
    if problem := database_problem():
        fail(problem)
    if problem := broker_problem(settings.CELERY_BROKER_URL):
        fail(problem)

    db = settings.DATABASES["default"]
    where = redact_url(settings.DATABASE_URL) if settings.DATABASE_URL else db["NAME"]
    print(f"Database: {where}", flush=True)
    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    call_command("ensure_login", stdout=io.StringIO())
    # The children open their own connections; this process keeps none open while it waits.
    connections.close_all()
    return read_login(settings.DATA_DIR / "login.txt")


def root_warning(euid: int | None = None) -> str | None:
    """What to say when the workers would run as root: a run's checkpoints, the model-written
    code the sandbox runs and the database credentials then share the machine's most powerful
    account (docs/security.md); None for an ordinary user."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return None
    return (
        "Warning: Troupe's workers are starting as root. Whatever a run makes them do "
        "happens with root's rights on this machine: start `make run` as an ordinary user "
        "(docs/security.md)."
    )


def broker_problem(url: str) -> str | None:
    """None when the broker answers; otherwise one line that names CELERY_BROKER_URL."""
    if url.startswith("filesystem:"):
        return None
    from kombu import Connection

    from webapp.env import redact_url

    try:
        with Connection(url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:  # whatever the transport raises, the advice is the same
        reason = " ".join(str(exc).split())
        return f"Cannot connect to the broker at CELERY_BROKER_URL={redact_url(url)}: {reason}"
    return None


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        # Like gunicorn, so that a port held only by connections in TIME_WAIT counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start(args: list[str]) -> subprocess.Popen:
    # A session of its own, so that Ctrl-C in the terminal reaches only this script, which then
    # stops the children in order, and so that their own children can be killed as a group.
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, start_new_session=True)


def is_serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class StopRequested(Exception):
    pass


class ChildExited(Exception):
    def __init__(self, name: str, child: subprocess.Popen):
        super().__init__(f"{name} exited with status {child.returncode}; Troupe stopped.")


class Stop:
    """What the signal handlers have asked for: a stop, then perhaps a faster one."""

    requested = False
    hurry = False

    @classmethod
    def on_signal(cls, signum, frame) -> None:
        if cls.requested:
            cls.hurry = True  # a second Ctrl-C while stopping skips the grace period
            return
        cls.requested = True
        raise StopRequested


def check_children(children: dict[str, subprocess.Popen]) -> None:
    for name, child in children.items():
        if child.poll() is not None:
            raise ChildExited(name, child)


def stop(children: dict[str, subprocess.Popen], grace: float) -> None:
    """SIGTERM each child, give them `grace` seconds together, then SIGKILL what is left of
    each child's process group (gunicorn's workers, Celery's pool processes)."""
    Stop.requested = True
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not Stop.hurry:
        if all(child.poll() is not None for child in children.values()):
            break
        time.sleep(0.1)
    for name, child in children.items():
        if child.poll() is None:
            print(f"{name} did not stop in time; killing it.", flush=True)
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


def hand_back() -> None:
    """Queue again the jobs the stopped worker held — runs, swap jobs, every kind of leased
    job (webapp/leases.py) — so the next `make run` resumes them at once, first, instead of
    after the stale-run sweep's wait (a training run rarely ends within the grace period,
    and the worker is then killed)."""
    from django.db import DatabaseError

    from webapp.leases import hand_back_all

    try:
        handed = hand_back_all(WORKER_NAME.replace("%h", socket.gethostname()))
    except DatabaseError as exc:  # the database went first: the sweep will find them later
        print(f"Could not hand the jobs back ({exc}); the stale-run sweep will.", flush=True)
        return
    for kind, ids in handed.items():
        if ids:
            print(f"Queued again to resume on the next start: {kind} {', '.join(map(str, ids))}.")


def start_all(children: dict[str, subprocess.Popen], port: int) -> None:
    """Start the web server, the worker and the radar worker, each into `children` as it
    starts, so a failure part-way stops those already running."""
    children["The web server"] = start(
        # No control socket: it lives in ~/.gunicorn, where a second instance would clash.
        [
            "gunicorn",
            "webapp.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--config",
            "python:webapp.gunicorn_conf",
            "--no-control-socket",
        ]
    )
    # No gossip, mingle or heartbeat: they only matter between several workers, and on
    # the embedded broker every heartbeat would be a file.
    quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    children["The worker"] = start(
        [
            "celery",
            "-A",
            "webapp",
            "worker",
            "--queues",
            "cpu,gpu",
            "--concurrency",
            "1",
            "--hostname",
            WORKER_NAME,
            "--loglevel",
            "INFO",
            *quiet,
        ]
    )
    children["The radar worker"] = start(
        # Milliseconds a task, so in its own process (solo: no pool to fork), never
        # queued behind the training run the other worker holds for minutes.
        [
            "celery",
            "-A",
            "webapp",
            "worker",
            "--queues",
            "radar",
            "--pool",
            "solo",
            "--hostname",
            "radar@%h",
            "--loglevel",
            "WARNING",
            *quiet,
        ]
    )


def wait_until_serving(children: dict[str, subprocess.Popen], url: str) -> None:
    """Return once the web server answers at `url`; fail if it has not within
    READY_TIMEOUT_SECONDS or a child exits first."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not is_serving(url + "accounts/login/"):
        check_children(children)
        if time.monotonic() > deadline:
            fail(f"the web server did not answer on {url} within {READY_TIMEOUT_SECONDS} s.")
        time.sleep(0.25)


def main() -> int:
    from webapp.env import EnvError, env_int

    try:
        port = env_int("PORT", 8000, minimum=1)
    except EnvError as exc:
        fail(str(exc))
    if port_in_use(port):
        fail(f"port {port} on 127.0.0.1 is in use: stop what holds it, or set PORT=<another>.")
    login = prepare()
    if warning := root_warning():
        print(warning, file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, Stop.on_signal)
    signal.signal(signal.SIGTERM, Stop.on_signal)
    children: dict[str, subprocess.Popen] = {}
    try:
        start_all(children, port)
        url = f"http://127.0.0.1:{port}/"
        wait_until_serving(children, url)
        print(
            f"\nTroupe is running at {url}\n"
            f"Sign in as {login['username']} with password {login['password']}\n"
            "Press Ctrl-C to stop.\n",
            flush=True,
        )
        while True:
            check_children(children)
            time.sleep(0.5)
    except StopRequested:
        print("\nStopping Troupe…", flush=True)
        stop(children, STOP_GRACE_SECONDS)
        hand_back()
        print("Troupe stopped.", flush=True)
        return 0
    except ChildExited as exc:
        stop(children, STOP_GRACE_SECONDS)
        hand_back()
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    except BaseException:
        stop(children, 0)
        raise


if __name__ == "__main__":
    sys.exit(main())
