"""The code sandbox: happy paths, then one test per attack, each checking the reported status
and that the host is unharmed.

Attacks that the Python guard would stop first run with `python_guard=False`, so the test
shows the kernel layer holding on its own; tests of a kernel layer skip (saying why) where
the machine does not provide it, and fail there instead under TROUPE_REQUIRE_SERVICES=1 (CI
proves every layer it claims).
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid

import pytest

import sandbox
from sandbox import (
    UID_BASE,
    Job,
    SandboxResult,
    SandboxTooWeak,
    run_many,
    run_program,
    run_tests,
)
from tests.helpers import ROOT, require_service
from tests.sandbox.sandbox_probe import (
    DISCOVERY,
    DISCOVERY_MODULES,
    KERNEL_OBJECTS,
    KERNEL_OBJECTS_REFUSED,
    MEMORY_READER,
    SEMAPHORES,
    SPARSE_MAPPINGS,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def layers() -> tuple[str, ...]:
    return run_program("pass").isolation


def need(layers, *names):
    """Skip unless the sandbox holds every layer in `names` (fail under
    TROUPE_REQUIRE_SERVICES=1)."""
    missing = [n for n in names if n not in layers]

    def probe() -> None:
        if missing:
            raise LookupError(f"this machine gives the sandbox no {', '.join(missing)} layer")

    require_service(f"the sandbox layer(s) {', '.join(names)}", probe)


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
    assert "before the tests could call it" in result.stderr


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


# --- the verdict comes from the checker, not from the program ------------------------------


def test_a_forged_completion_message_and_early_exit_do_not_pass():
    # Before the checker, these three lines scored 1.0: "completed" on fd 3, then exit 0.
    program = (
        "import os\n"
        "os.write(3, b'completed\\nverdict passed\\n')\n"
        "os._exit(0)\n"
        "def f(x):\n    return 0\n"
    )
    result = run_tests(program, ["assert f(1) == 1"], "f", python_guard=False)
    assert result.status == "failed"


def test_an_object_that_equals_everything_does_not_pass():
    program = (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\n"
        "def f(x):\n    return Anything()\n"
    )
    result = run_tests(program, ["assert f(1) == 1", "assert f(2)"], "f")
    assert result.status == "failed"
    assert "not plain data" in result.stderr


def test_patching_the_programs_own_assert_machinery_changes_nothing():
    program = (
        "import builtins\n"
        "class Quiet(Exception):\n    pass\n"
        "builtins.AssertionError = Quiet\n"
        "def f(x):\n    return 0\n"
    )
    assert run_tests(program, ["assert f(1) == 1"], "f").status == "failed"


def test_the_program_cannot_replace_the_builtins_or_modules_the_tests_compare_with():
    program = (
        "def abs(x):\n    return 0\n"
        "def len(x):\n    return 3\n"
        "class math:\n    def isclose(*args, **kwargs):\n        return True\n"
        "def f(x):\n    return [0]\n"
    )
    for test in (
        "assert abs(f(1)[0] - 2.5) < 1e-6",
        "assert len(f(1)) == 3",
        "import builtins\nassert math.isclose(f(1)[0], 2.5)",
    ):
        assert run_tests(program, [test], "f").status == "failed", test
    # The same tests pass a real solution that relies on its own `import math`.
    real = "import math\ndef f(x):\n    return [2.5, 0, 0]\n"
    tests = ["assert abs(f(1)[0] - 2.5) < 1e-6", "assert len(f(1)) == 3"]
    assert run_tests(real, [*tests, "assert math.isclose(f(1)[0], 2.5)"], "f").passed


def test_a_stop_iteration_from_the_program_does_not_end_the_tests_early():
    program = "def f(x):\n    raise StopIteration\n"
    test = "assert all(map(lambda case: f(case[0]) == case[1], [(1, 2), (2, 3)]))"
    result = run_tests(program, [test], "f")
    assert result.status == "failed"
    assert "StopIteration" in result.stderr


def test_the_hidden_tests_are_not_among_the_programs_objects():
    # Walks every frame's variables (the supervisor's job list included) for the expected
    # value; the needle is computed, so the program's own source does not contain it.
    program = (
        "import sys\n"
        "def f(x):\n    return 0\n"
        "needle = 987654320 + 1  # an int: the walk below must not find the needle itself\n"
        "def walk(obj, depth=0):\n"
        "    if isinstance(obj, str):\n        return str(needle) in obj\n"
        "    if depth < 6 and isinstance(obj, dict):\n"
        "        return any(walk(v, depth + 1) for v in list(obj.values()))\n"
        "    if depth < 6 and isinstance(obj, (list, tuple)):\n"
        "        return any(walk(v, depth + 1) for v in obj)\n"
        "    return False\n"
        "frame, found = sys._getframe(), False\n"
        "while frame is not None:\n"
        "    found = found or walk(dict(frame.f_locals))\n"
        "    frame = frame.f_back\n"
        "print('found' if found else 'hidden')\n"
    )
    result = run_tests(program, ["assert f(1) == 987654321"], "f")
    assert result.stdout == "hidden\n"
    assert result.status == "failed"


def test_the_checker_passes_real_solutions_of_every_shape():
    program = (
        "import math\n"
        "LIMIT = 10\n"
        "def pair(x):\n    return (x, -x)\n"
        "def sort_in_place(xs):\n    xs.sort()\n"
        "def check_positive(x):\n"
        "    if x < 0:\n        raise ValueError('negative')\n    return True\n"
        "class Solution:\n"
        "    def twice(self, x):\n        return 2 * x\n"
    )
    tests = [
        "assert pair(2) == (2, -2) and LIMIT == 10 and math.pi > 3",
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]",
        "try:\n    check_positive(-1)\n    raise AssertionError('no error')\n"
        "except ValueError as exc:\n    assert str(exc) == 'negative'",
        "assert Solution().twice(21) == 42",
        "assert check_positive(x=1) is True",
    ]
    result = run_tests(program, tests, "pair")
    assert result.status == "passed", result.stderr


def test_a_program_cannot_find_its_tests_expected_value_in_its_own_memory():
    token = uuid.uuid4().hex
    tests = [f"assert solve(7) == {token!r}"]
    wrong = sandbox.tests_job("def solve(x):\n    return 'no'\n", tests, "solve")
    reader = sandbox.tests_job(MEMORY_READER, tests, "solve", python_guard=False)
    # As CodeTask.score_many sends them: completions of one problem in one batch, a failed
    # one (its traceback shows the expected value) before the reader; and the reader alone.
    first, after_failure = run_many([wrong, reader], workers=1)
    alone = run_tests(MEMORY_READER, tests, "solve", python_guard=False)
    for result in (after_failure, alone):
        assert result.stdout.startswith("nothing"), result.stdout
        assert result.status == "failed"
    # The failed test's traceback still reaches the host, which no program is forked from.
    assert first.status == "failed" and token in first.stderr


def test_the_checkers_output_follows_the_programs():
    result = run_tests(
        "print('from the program')\ndef f(x):\n    return x\n",
        ["print('from the tests')", "assert f(1) == 2, 'one is not two'"],
        "f",
    )
    assert result.status == "failed"
    assert result.stdout == "from the program\nfrom the tests\n"
    assert result.stderr.rstrip().endswith("AssertionError: one is not two")


def test_a_batch_of_test_jobs_keeps_each_verdict():
    good = "def f(x):\n    return x + 1\n"
    bad = "def f(x):\n    return x\n"
    jobs = [sandbox.tests_job(p, ["assert f(1) == 2"], "f") for p in (good, bad, good, bad, good)]
    assert [r.status for r in run_many(jobs, workers=2)] == ["passed", "failed"] * 2 + ["passed"]


# --- the checker takes nothing executable from the program ---------------------------------


@pytest.mark.parametrize("module", DISCOVERY_MODULES)
def test_a_module_named_by_the_program_never_runs_in_the_checker(module):
    result = run_tests(DISCOVERY.format(module=module), ["assert f(1) == 1"], "f")
    assert result.status == "failed"


def test_a_completion_that_solves_nothing_scores_zero_on_every_code_problem():
    # Once, through the project's own scoring path, this one completion scored 1.0 on
    # all 16 synthetic problems (the tests of each call f, which always returns 0).
    from trainer.tasks import load_task

    task = load_task("code", "synthetic", seed=0, train_size=200, test_size=16)
    problems = task.problems("test")[:16]
    forged = f"```python\n{DISCOVERY.format(module='unittest.__main__')}```"
    assert task.score_many(problems, [forged] * 16) == [0.0] * 16
    solved = [f"```python\n{p.answer}\n```" for p in problems]
    assert task.score_many(problems, solved) == [1.0] * 16


def test_the_checker_works_where_the_program_cannot_write():
    program = "open('planted.py', 'w').write('x = 1')\ndef f(x):\n    return x\n"
    tests = [
        "import os, sys\n"
        "assert 'planted.py' not in os.listdir('.')\n"
        "assert not os.access('.', os.W_OK)\n"
        "assert not [p for p in sys.path if os.access(p, os.W_OK)]\n"
        "assert f(1) == 1"
    ]
    result = run_tests(program, tests, "f")
    assert result.status == "passed", result.stderr


def _rewriting_names(change: str) -> str:
    """A correct program that rewrites the description of its names the checker reads
    (`message["names"]`, a dict), as any program can: it shares a process with our end."""
    return (
        "import sys\n"
        "ours = sys.modules['sandbox.checker']\n"
        "real_send = ours.send\n"
        "def send(fd, message):\n"
        "    if 'names' in message:\n"
        f"        {change}\n"
        "    real_send(fd, message)\n"
        "ours.send = send\n"
        "def f(x):\n    return -x\n"
    )


def test_the_programs_dunder_names_never_reach_the_tests():
    # A `__builtins__` of the program's would replace the tests' builtins (here: no abs).
    program = _rewriting_names("message['names']['__builtins__'] = ('value', {})")
    result = run_tests(program, ["assert abs(f(-2)) == 2"], "f")
    assert result.status == "passed", result.stderr


def test_the_program_cannot_name_a_module_for_the_checker_to_import():
    # `os` and `antigravity` are standard-library modules outside the fixed list: the tests
    # get neither the checker's import nor anything of the program's under those names.
    program = _rewriting_names(
        "message['names'].update(os=('module', 'os'), webbrowser=('module', 'antigravity'), "
        "c=('module', 'collections'))"
    )
    tests = [
        "assert 'os' not in globals() and 'webbrowser' not in globals()",
        "assert c.Counter('aab')['a'] == 2 and f(2) == -2",
    ]
    result = run_tests(program, tests, "f")
    assert result.status == "passed", result.stderr


def test_the_programs_messages_are_read_as_plain_data_only():
    from sandbox import plain

    values = [None, True, 7, -(2**100), 2.5, 1 - 2j, "é\udc80", b"\x00", (1, [2]), {1: {3}}]
    values.append(frozenset({"a"}))
    assert plain.decode(plain.encode(values)) == values
    hostile = [
        marshal_of(compile("print(1)", "x", "exec")),  # a code object
        marshal_of(["shared", "shared"], version=4),  # references between objects
        b"[\x02\x00\x00\x00i\x01\x00\x00\x00",  # cut short
        b"<\x01\x00\x00\x00[\x00\x00\x00\x00",  # a set holding a list
        b"N" + b"N",  # trailing bytes
        b"(\x01\x00\x00\x00" * 200 + b"N",  # nested too deep
    ]
    for blob in hostile:
        with pytest.raises(ValueError):
            plain.decode(blob)


def marshal_of(value, version: int = 4) -> bytes:
    import marshal

    return marshal.dumps(value, version)


def test_a_failed_tests_traceback_does_not_show_where_the_repository_is():
    result = run_tests("def f(x):\n    raise ValueError('no')\n", ["assert f(1) == 1"], "f")
    assert result.status == "failed"
    assert "ValueError: no" in result.stderr and str(ROOT) not in result.stderr


# --- memory and IPC -------------------------------------------------------------------------


def test_semaphore_sets_and_message_queues_are_refused(layers):
    need(layers, "seccomp")
    # In an attack, 615 semaphore sets held 1.2 GB of kernel memory under memory_mb=256, where
    # no memory cgroup counts it. Each set here is small; before the fix all ten were made.
    result = run_program(SEMAPHORES, python_guard=False, memory_mb=256)
    assert result.stdout.split("\n") == ["0 1", "-1 1", ""], result.stderr  # EPERM


def test_ram_outside_the_address_space_cap_and_new_processes_are_refused(layers):
    need(layers, "seccomp")
    # Each of these held RAM that RLIMIT_AS does not count (a memfd of 720 MB, a shared
    # memory segment), or multiplied it (every process has its own address space).
    attack = (
        "import ctypes, os, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def errno(call):\n"
        "    try:\n"
        "        value = call()\n"
        "    except OSError as exc:\n"
        "        return exc.errno\n"
        "    return ctypes.get_errno() if value < 0 else 'made'\n"
        "print(errno(lambda: os.memfd_create('ram')))\n"
        "print(errno(lambda: libc.shmget(0, 1 << 20, 0o1600)))\n"
        "print(errno(lambda: libc.msgget(0, 0o1600)))\n"
        "print(errno(lambda: libc.semget(0, 1, 0o1600)))\n"
        "print(errno(lambda: libc.fork()))\n"
        "done = []\n"
        "thread = threading.Thread(target=lambda: done.append(1))\n"
        "thread.start()\n"
        "thread.join()\n"
        "print('threads', len(done))\n"
    )
    result = run_program(attack, python_guard=False)
    assert result.stdout.split("\n") == ["1"] * 5 + ["threads 1", ""]  # EPERM x 5


def test_kernel_objects_that_no_job_limit_bounds_are_refused(layers):
    need(layers, "seccomp")
    result = run_program(KERNEL_OBJECTS, python_guard=False)
    assert result.stdout.split("\n") == KERNEL_OBJECTS_REFUSED, result.stderr


def test_the_page_tables_of_sparse_mappings_are_bounded():
    # Without a memory cgroup this once grew a job to +734 MB of page tables. The
    # supervisor stops a job at memory_mb / 8 of them (32 MB here), memcg or not.
    result = run_program(SPARSE_MAPPINGS, python_guard=False, memory_mb=256, timeout=20.0)
    assert result.status == "memory" and result.stdout == "", result.stdout
    assert "page tables over 32 MB" in result.stderr  # before the cgroup's 256 MB, if any


def test_tmp_files_count_against_the_memory_cgroup(layers):
    need(layers, "memcg", "mount")
    attack = (
        "data = b'x' * (1 << 20)\n"
        "blocks = [bytearray(60 << 20)]\n"
        "for block in blocks:\n"
        "    for i in range(0, len(block), 4096):\n"
        "        block[i] = 1\n"
        "with open('big', 'wb') as fh:\n"
        "    for _ in range(60):\n"
        "        fh.write(data)\n"
        "print('wrote')\n"
    )
    # 60 MB of heap and 60 MB of /tmp are each allowed; together they are over 100 MB.
    result = run_program(attack, memory_mb=100, disk_mb=64, timeout=8.0)
    assert result.status == "memory"


def test_job_cgroups_of_a_killed_supervisor_are_removed_by_the_next(layers):
    need(layers, "memcg")
    from sandbox import cgroups

    _, parent = cgroups.find_memory_cgroup()
    stale = os.path.join(parent, f"{cgroups.CGROUP_PREFIX}4999999-0")  # > any pid_max
    os.mkdir(stale)
    try:
        assert run_program("pass").passed
        assert not os.path.exists(stale)
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)


# --- the minimum isolation setting ------------------------------------------------------------


def test_the_minimum_is_read_from_the_environment():
    assert sandbox.required_layers({}) == sandbox.DEFAULT_MIN_ISOLATION
    assert sandbox.required_layers({"TROUPE_SANDBOX_MIN_ISOLATION": "none"}) == ()
    env = {"TROUPE_SANDBOX_MIN_ISOLATION": " mount, memcg ,mount"}
    assert sandbox.required_layers(env) == ("mount", "memcg")
    with pytest.raises(ValueError, match="unknown layers chroot"):
        sandbox.required_layers({"TROUPE_SANDBOX_MIN_ISOLATION": "mount,chroot"})


def test_scoring_refuses_below_the_minimum_unless_weak_is_allowed(layers):
    # uid (root) and userns (non-root) never hold together: one of them is always missing.
    env = {"TROUPE_SANDBOX_MIN_ISOLATION": "uid,userns"}
    with pytest.raises(SandboxTooWeak, match="lacks the isolation layer"):
        sandbox.require_isolation(env)
    allowed = {**env, "TROUPE_SANDBOX_ALLOW_WEAK": "1"}
    assert sandbox.require_isolation(allowed) == layers


@pytest.mark.parametrize(
    ("found", "scores"),
    [
        (("uid", "rlimits", "seccomp"), False),  # no private root, nothing confining writes
        (("uid", "rlimits", "seccomp", "landlock"), True),  # writes only in its own directory
        (("rlimits", "pid", "net", "ipc", "mount", "seccomp"), True),
    ],
)
def test_weak_mode_is_refused_outright_where_nothing_keeps_writes_in_the_job(
    monkeypatch, found, scores
):
    from sandbox import isolation

    monkeypatch.setattr(isolation, "_probed", found)
    opted_in = {"TROUPE_SANDBOX_MIN_ISOLATION": "none", "TROUPE_SANDBOX_ALLOW_WEAK": "1"}
    if scores:
        assert sandbox.require_isolation(opted_in) == found
    else:
        with pytest.raises(SandboxTooWeak, match="keeps no program's writes inside its job"):
            sandbox.require_isolation(opted_in)


def test_the_worker_logs_the_layers_at_start(caplog, layers):
    from workers import sandbox_report

    with caplog.at_level("INFO", logger="troupe.sandbox"):
        sandbox_report.log_sandbox_layers()
    (record,) = caplog.records
    assert f"code sandbox isolation layers: {', '.join(layers)}" in record.getMessage()
    missing = [n for n in sandbox.required_layers() if n not in layers]
    assert record.levelname == ("ERROR" if missing else "INFO")
