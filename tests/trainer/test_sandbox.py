"""The code sandbox: happy paths, then one test per attack, each checking the reported status
and that the host is unharmed.

Attacks that the Python guard would stop first run with `python_guard=False`, so the test
shows the kernel layer holding on its own; tests of a kernel layer skip (saying why) where
the machine does not provide it.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid

import pytest

from trainer.tasks.sandbox import (
    UID_BASE,
    Job,
    SandboxResult,
    run_many,
    run_program,
    run_tests,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def layers() -> tuple[str, ...]:
    return run_program("pass").isolation


def need(layers, *names):
    missing = [n for n in names if n not in layers]
    if missing:
        pytest.skip(f"this machine gives the sandbox no {', '.join(missing)} layer")


def processes_of(uid: int) -> list[int]:
    """Host pids whose real uid is `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(name))
                        break
        except OSError:
            continue
    return found


def sandbox_uid(result: SandboxResult) -> int:
    uid = int(result.stdout.split()[0])
    assert uid >= UID_BASE or "uid" not in result.isolation
    return uid


# --- happy paths --------------------------------------------------------------------------


def test_it_passes_a_program_that_exits_cleanly():
    result = run_program("import math\nprint(math.factorial(5))")
    assert result.status == "passed" and result.passed
    assert result.returncode == 0
    assert result.stdout == "120\n"
    assert not result.truncated


def test_it_fails_a_program_that_raises():
    result = run_program("x = 1\nassert x == 2, 'nope'")
    assert result.status == "failed"
    assert result.returncode == 1
    assert "AssertionError: nope" in result.stderr
    assert "assert x == 2" in result.stderr  # the program's own source line is shown


def test_it_reports_a_crash_when_the_program_dies_by_a_signal():
    result = run_program("import faulthandler\nfaulthandler._sigsegv()")
    assert result.status == "crash"
    assert result.returncode == -signal.SIGSEGV


def test_it_passes_tests_that_hold_and_fails_those_that_do_not():
    program = "def add(a, b):\n    return a + b\n"
    assert run_tests(program, ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"], "add").passed
    result = run_tests(program, ["assert add(1, 2) == 3", "assert add(2, 2) == 5"], "add")
    assert result.status == "failed"
    assert "assert add(2, 2) == 5" in result.stderr


def test_it_fails_tests_when_the_entry_point_is_missing():
    result = run_tests("def other(x):\n    return x\n", ["assert f(1) == 1"], "f")
    assert result.status == "failed"
    assert "does not define f()" in result.stderr


@pytest.mark.parametrize(
    "exit_call", ["import sys; sys.exit(0)", "import os; os._exit(0)", "exit()"]
)
def test_an_early_exit_does_not_pass_the_tests(exit_call):
    result = run_tests(f"def f(x):\n    return 0\n{exit_call}\n", ["assert f(1) == 1"], "f")
    assert result.status == "failed"
    assert result.returncode == 0


def test_run_many_keeps_order_and_one_bad_job_does_not_spoil_the_others():
    jobs = [
        "print('a')",
        Job("while True: pass", timeout=1.0),
        "raise SystemExit(3)",
        "print('d')",
        Job("import sys; sys.exit(0)\nassert False", require_completion=True),
    ]
    results = run_many(jobs, workers=2)
    assert [r.status for r in results] == ["passed", "timeout", "failed", "passed", "failed"]
    assert results[0].stdout == "a\n" and results[3].stdout == "d\n"
    assert results[2].returncode == 3


def test_a_program_cannot_leave_files_behind_for_the_next_one(layers):
    need(layers, "mount")
    first, second = run_many(
        [
            Job("open('note.txt', 'w').write('hello')\nprint('written')"),
            Job("import os\nprint(os.listdir('.'))"),
        ],
        workers=1,
    )
    assert first.stdout == "written\n"
    assert second.stdout == "[]\n"


# --- attacks ------------------------------------------------------------------------------


def test_an_infinite_loop_times_out_and_leaves_no_process(layers):
    started = time.monotonic()
    result = run_program(
        "import os\nprint(os.getuid(), flush=True)\nwhile True:\n    pass\n", timeout=1.0
    )
    assert result.status == "timeout"
    assert time.monotonic() - started < 8  # 1 s, with room for a loaded machine
    assert result.returncode is None
    if "uid" in layers:
        assert processes_of(sandbox_uid(result)) == []


def test_cpu_time_is_capped_even_when_the_wall_clock_allows_more():
    result = run_program("while True:\n    pass\n", timeout=30.0, cpu_seconds=1)
    assert result.status == "timeout"
    assert result.returncode == -signal.SIGXCPU
    assert result.seconds < 29  # stopped by the CPU limit, long before the wall clock


def test_a_fork_bomb_is_stopped_by_the_python_guard():
    result = run_program("import os\nwhile True:\n    os.fork()\n", timeout=3.0)
    assert result.status == "failed"
    assert "PermissionError" in result.stderr
    assert result.seconds < 3


def test_a_fork_bomb_is_contained_by_the_kernel_and_leaves_nothing_behind(layers):
    need(layers, "uid")  # RLIMIT_NPROC needs a non-root uid; cleanup is by pid ns or by uid
    bomb = (
        "import os, time\n"
        "print(os.getuid(), flush=True)\n"
        "made, start = 0, time.time()\n"
        "while time.time() - start < 1.0:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                try:\n"
        "                    os.fork()\n"
        "                except OSError:\n"
        "                    pass\n"
        "        made += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print(made)\n"
    )
    started = time.monotonic()
    result = run_program(bomb, timeout=4.0, python_guard=False, max_processes=16)
    assert result.status == "passed", result.stderr
    assert int(result.stdout.split()[1]) < 16  # RLIMIT_NPROC held for the whole uid
    assert time.monotonic() - started < 10
    assert processes_of(sandbox_uid(result)) == []  # not one of its children is left


def test_a_memory_bomb_hits_the_memory_cap():
    started = time.monotonic()
    result = run_program(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(50_000_000))\n",
        memory_mb=256,
        timeout=5.0,
    )
    assert result.status == "memory"
    assert time.monotonic() - started < 10


def test_one_huge_allocation_is_refused():
    result = run_program("x = bytearray(8 * 1024 ** 3)", memory_mb=256)
    assert result.status == "memory"
    assert "MemoryError" in result.stderr


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_huge_output_is_truncated_and_the_run_stopped(stream):
    started = time.monotonic()
    result = run_program(
        f"import sys\nwhile True:\n    sys.{stream}.write('x' * 65536)\n",
        max_output=10_000,
        timeout=5.0,
    )
    assert result.truncated
    assert result.status == "crash"
    assert len(getattr(result, stream)) <= 10_000 + 200  # the cap, plus the sandbox's note
    assert time.monotonic() - started < 8


def test_files_outside_the_sandbox_cannot_be_changed_or_deleted(tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("original")
    attack = (
        f"import os\n"
        f"for action in (lambda: open({str(sentinel)!r}, 'w').write('pwned'),\n"
        f"               lambda: os.remove({str(sentinel)!r})):\n"
        f"    try:\n"
        f"        action()\n"
        f"        print('succeeded')\n"
        f"    except OSError as exc:\n"
        f"        print(type(exc).__name__)\n"
    )
    result = run_program(attack)
    assert result.status == "passed"
    assert "succeeded" not in result.stdout
    assert sentinel.read_text() == "original"


def test_writes_to_tmp_land_in_a_private_directory_that_is_gone_afterwards(layers):
    need(layers, "mount")
    name = f"/tmp/troupe-sandbox-escape-{uuid.uuid4().hex}"
    result = run_program(
        f"open({name!r}, 'w').write('x')\nimport os\nprint(os.getcwd())\n"
        "open('here.txt', 'w').write('y')\n"
    )
    assert result.status == "passed"
    assert not os.path.exists(name)
    assert result.stdout.strip() == "/tmp"  # the program's private /tmp, not the host's


def test_host_files_are_invisible(layers):
    need(layers, "mount")
    here = os.path.abspath(__file__)
    result = run_program(
        "import os\n"
        f"print(os.path.exists({here!r}), os.path.exists('/etc/passwd'), os.path.exists('/work'))\n"
        "print(os.listdir('/'))\n"
    )
    flags, listing = result.stdout.splitlines()
    assert flags.split() == ["False", "False", "False"]
    assert "etc" not in listing and "home" not in listing


def test_the_parents_environment_is_invisible(monkeypatch):
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("TROUPE_TEST_SECRET", secret)
    monkeypatch.setenv("DATABASE_URL", f"postgres://user:{secret}@db/troupe")
    attack = (
        "import os\n"
        "print(sorted(os.environ.items()))\n"
        f"for path in ('/proc/self/environ', '/proc/1/environ', '/proc/{os.getpid()}/environ'):\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = run_program(attack, python_guard=False)
    assert result.status == "passed"
    assert secret not in result.stdout
    assert "DATABASE_URL" not in result.stdout
    assert "TROUPE_TEST_SECRET" not in result.stdout


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.3)
    yield server
    server.close()


def _connect(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    print('connected')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )


def _no_connection_arrived(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return True
    conn.close()
    return False


def test_a_network_connection_never_arrives(layers, listener):
    need(layers, "net")
    result = run_program(_connect(listener.getsockname()[1]), python_guard=False)
    assert result.status == "passed"
    assert result.network_isolated
    assert "connected" not in result.stdout
    assert _no_connection_arrived(listener)


def test_the_python_guard_refuses_sockets_too(listener):
    result = run_program(_connect(listener.getsockname()[1]))
    assert result.stdout.strip() == "PermissionError"
    assert _no_connection_arrived(listener)


def test_the_program_cannot_signal_its_parent_or_the_host(layers):
    need(layers, "uid")
    received = []
    previous = signal.signal(signal.SIGTERM, lambda *_: received.append(True))
    try:
        attack = (
            "import os, signal\n"
            f"for pid, sig in ((os.getppid(), signal.SIGTERM), ({os.getpid()}, signal.SIGTERM),\n"
            "                 (1, signal.SIGKILL)):\n"
            "    try:\n"
            "        os.kill(pid, sig)\n"
            "        print('sent')\n"
            "    except OSError as exc:\n"
            "        print(type(exc).__name__)\n"
            "try:\n"
            "    os.kill(-1, signal.SIGKILL)  # everything it may signal: only its own uid\n"
            "except OSError:\n"
            "    pass\n"
        )
        result = run_program(attack, python_guard=False)
        time.sleep(0.1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == []  # the test process (the host) got nothing, and is still here
    assert result.status == "passed"
    assert "sent" not in result.stdout  # every kill failed: EPERM (other uid) or ESRCH (unseen)
    assert result.stdout.count("Error") == 3


def test_a_full_disk_stays_inside_the_sandbox(layers):
    need(layers, "mount")
    attack = (
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        with open(f'f{n}', 'wb') as fh:\n"
        "            fh.write(b'x' * (4 << 20))\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__, n)\n"
    )
    result = run_program(attack, disk_mb=16)
    assert result.status == "passed"
    kind, written = result.stdout.split()
    assert kind == "OSError" and int(written) <= 4
