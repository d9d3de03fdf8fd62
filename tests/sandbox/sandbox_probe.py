"""Run from tests/sandbox/test_sandbox_modes.py in a process with fewer privileges (a non-root
uid, or root without CAP_SYS_ADMIN): tries the sandbox's attacks and prints what happened as
JSON, so the test can check which layers held in that mode.

    python tests/sandbox/sandbox_probe.py PORT FILE

PORT: a TCP listener on 127.0.0.1; FILE: a host file this uid owns, which the program tries
to read, overwrite and delete.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

import sandbox
from sandbox import Job, run_many, run_program, run_tests, tests_job
from tests.sandbox.code_attacks import scores

FORGED = "import os\nos.write(3, b'completed\\n')\nos._exit(0)\ndef f(x):\n    return 0\n"
EQUALS_ALL = "class A:\n    def __eq__(s, o):\n        return True\ndef f(x):\n    return A()\n"
SEM_WRITER = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "ident = libc.semget(0x7E5702, 1, 0o1666)\n"
    "print('made' if ident >= 0 and libc.semctl(ident, 0, 16, 4242) == 0 else 'refused')\n"
)
SEM_READER = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "ident = libc.semget(0x7E5702, 1, 0)\n"
    "print('nothing' if ident < 0 else libc.semctl(ident, 0, 12))\n"
)
OUTSIDE = (
    "import os\n"
    "path = {path!r}\n"
    "for action in (lambda: open(path).read(), lambda: open(path, 'w').write('pwned'),\n"
    "               lambda: os.remove(path)):\n"
    "    try:\n"
    "        action()\n"
    "        print('succeeded')\n"
    "    except OSError as exc:\n"
    "        print(type(exc).__name__)\n"
)
# The forged verdict of an earlier attack: past the Python guard, a program scans its own
# memory with process_vm_readv (which fails softly on unmapped pages) for the tests' expected
# value and returns it. The pattern is split so that the program's own source does not match it.
MEMORY_READER = r"""
import ctypes, os, re
libc = ctypes.CDLL(None, use_errno=True)
class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc.process_vm_readv.restype = ctypes.c_ssize_t
libc.sbrk.restype = ctypes.c_void_p
CHUNK = 1 << 16
buf = ctypes.create_string_buffer(CHUNK)
pattern = re.compile(rb"solve\(7\) ={2} '([0-9a-f]{32})'")
def scan(low, high):
    at = max(low, 4096) & ~0xFFF
    while at < high:
        local, remote = IOVec(ctypes.addressof(buf), CHUNK), IOVec(at, CHUNK)
        got = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got > 0:
            found = pattern.search(buf.raw[:got])
            if found:
                return found.group(1).decode()
            at += got
        else:
            at += 4096
    return None
top = libc.sbrk(0)  # the malloc heap; then around objects, where pymalloc's arenas lie
answer = scan(top - (96 << 20), top + (1 << 20))
for near in (id(libc), id(1 << 70), id(buf)):
    answer = answer or scan(near - (64 << 20), near + (64 << 20))
print("found" if answer else "nothing")
def solve(x):
    return answer
"""
SEMAPHORES = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "made = 0\n"
    "for _ in range(10):\n"
    "    if libc.semget(0, 250, 0o600) < 0:\n"
    "        break\n"
    "    made += 1\n"
    "print(made, ctypes.get_errno())\n"
    "O_CREAT_RDWR = 0o102\n"
    "print(libc.mq_open(b'/troupe', O_CREAT_RDWR, 0o600, None), ctypes.get_errno())\n"
)
MEMFD = (
    "import os\n"
    "try:\n    os.memfd_create('ram')\n    print('made')\n"
    "except OSError as exc:\n    print(exc.errno)\n"
)

# Once a name of the program holding a module called `unittest.__main__` made the checker
# import it, which ran test discovery in the checker's working directory, the program's /tmp:
# the test file planted there wrote "verdict passed" on the checker's verdict pipe.
DISCOVERY = (
    "import types\n"
    "with open('test_troupe_forge.py', 'w') as fh:\n"
    "    fh.write(\"import os\\nos.write(3, b'verdict passed\\\\n')\\nos._exit(0)\\n\")\n"
    "discovery = types.ModuleType({module!r})\n"
    "def f(x):\n"
    "    return 0\n"
)
DISCOVERY_MODULES = ("unittest.__main__", "unittest", "test_troupe_forge")
# Kernel objects no limit of a job bounds without a memory cgroup: secret memory,
# POSIX timers and timerfds (~96k a job), inotify instances (watches count against the host
# user's quota in user-namespace modes). Each call by number, past any Python wrapper; the
# errno of each, or "made".
CALLS_REFUSED = ("memfd_secret", "timer_create", "timerfd_create", "inotify_init1", "fanotify_init")
KERNEL_OBJECTS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
arm = os.uname().machine == "aarch64"
calls = {
    "memfd_secret": (447, 0),
    "timer_create": (107 if arm else 222, 1, 0, ctypes.byref(ctypes.c_int())),
    "timerfd_create": (85 if arm else 283, 1, 0),
    "inotify_init1": (26 if arm else 294, 0),
    "fanotify_init": (262 if arm else 300, 0x200, 0),  # FAN_REPORT_FID: allowed unprivileged
}
for name, (number, *args) in calls.items():
    made = libc.syscall(number, *args)
    print(name, "made" if made >= 0 else ctypes.get_errno())
"""
# One-page mappings a gigabyte apart, each touched, cost ~8 KB of page tables each
# (kernel memory no rlimit counts); 30,000 of them fit in memory_mb=256 of address space and
# would hold ~240 MB. Prints how many it made.
SPARSE_MAPPINGS = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
made = 0
for i in range(30_000):
    at = libc.mmap((1 << 44) + (i << 30), 4096, 3, 0x22 | 0x100000, -1, 0)  # NOREPLACE
    if at is None or at == ctypes.c_void_p(-1).value:
        break
    ctypes.c_char.from_address(at).value = b"x"
    made += 1
print(made)
"""
KERNEL_OBJECTS_REFUSED = [f"{name} 1" for name in CALLS_REFUSED] + [""]  # EPERM each


# Files named like standard modules, planted where any Python process on the host could pick
# them up, and in the program's own directory; prints where each write went.
PLANT = """
import os
for folder in ("/tmp", "/var/tmp", "/dev/shm", os.getcwd()):
    for name in ("json.py", "sitecustomize.py", "troupe_{tag}.pth", "troupe_{tag}.py"):
        try:
            with open(os.path.join(folder, name), "x") as fh:
                fh.write("raise SystemExit('planted')")
            print("written")
        except FileExistsError:
            print("exists")
        except OSError as exc:
            print(type(exc).__name__)
"""


def planted() -> dict:
    """What a program wrote outside its job: its own report, and the host's folders after."""
    tag = uuid.uuid4().hex
    names = ("json.py", "sitecustomize.py", f"troupe_{tag}.pth", f"troupe_{tag}.py")
    places = [os.path.join(f, n) for f in ("/tmp", "/var/tmp", "/dev/shm") for n in names]
    before = {path for path in places if os.path.lexists(path)}
    said = run_program(PLANT.format(tag=tag), python_guard=False).stdout.split()
    left = [path for path in places if os.path.lexists(path) and path not in before]
    return {"outside": said[:12], "own": said[12:], "left": left}


def attack_scores() -> dict:
    """The code attacks through CodeTask.score_many; the weak modes opt in to score."""
    opt_in = {sandbox.MIN_ISOLATION_ENV: "none", sandbox.ALLOW_WEAK_ENV: "1"}
    before = {name: os.environ.get(name) for name in opt_in}
    os.environ.update(opt_in)
    try:
        return scores()
    except sandbox.SandboxTooWeak as exc:
        return {"refused": str(exc)}
    finally:
        for name, value in before.items():
            os.environ.pop(name, None) if value is None else os.environ.update({name: value})


def connect(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )


def main() -> None:
    port, outside = int(sys.argv[1]), sys.argv[2]
    report: dict = {"layers": list(run_program("pass").isolation)}
    report["forged_pass"] = run_tests(FORGED, ["assert f(1) == 1"], "f", python_guard=False).status
    report["equals_all"] = run_tests(EQUALS_ALL, ["assert f(1) == 1"], "f").status
    report["solution"] = run_tests("def f(x):\n    return x\n", ["assert f(1) == 1"], "f").status
    writer, reader = run_many(
        [Job(SEM_WRITER, python_guard=False), Job(SEM_READER, python_guard=False)], workers=1
    )
    report["ipc"] = [writer.stdout.strip(), reader.stdout.strip()]
    report["memfd"] = run_program(MEMFD, python_guard=False).stdout.strip()
    report["discovery"] = [
        run_tests(DISCOVERY.format(module=m), ["assert f(1) == 1"], "f").status
        for m in DISCOVERY_MODULES
    ]
    report["kernel_objects"] = run_program(KERNEL_OBJECTS, python_guard=False).stdout.split("\n")
    sparse = run_program(SPARSE_MAPPINGS, python_guard=False, memory_mb=256, timeout=20.0)
    report["page_tables"] = [sparse.status, sparse.stdout.strip()]
    report["network"] = run_program(connect(port), python_guard=False).stdout.strip()
    report["outside"] = run_program(OUTSIDE.format(path=outside)).stdout.split()
    report["semaphores"] = run_program(SEMAPHORES, python_guard=False).stdout.split("\n")
    token = uuid.uuid4().hex
    tests = [f"assert solve(7) == {token!r}"]
    wrong = tests_job("def solve(x):\n    return 'no'\n", tests, "solve")
    reader = tests_job(MEMORY_READER, tests, "solve", python_guard=False)
    report["memory_reader"] = [r.status for r in run_many([wrong, reader], workers=1)]
    try:
        sandbox.require_isolation({})  # the default minimum
        report["policy"] = "scores"
    except sandbox.SandboxTooWeak as exc:
        report["policy"] = f"refuses: {exc}"
    try:  # a lowered minimum still needs the mount layer, unless weak is allowed
        sandbox.require_isolation({sandbox.MIN_ISOLATION_ENV: "none"})
        report["lowered_policy"] = "scores"
    except sandbox.SandboxTooWeak as exc:
        report["lowered_policy"] = f"refuses: {exc}"
    opt_in = {sandbox.MIN_ISOLATION_ENV: "none", sandbox.ALLOW_WEAK_ENV: "1"}
    try:
        report["opted_in_policy"] = sandbox.require_isolation(opt_in) and "scores"
    except sandbox.SandboxTooWeak as exc:
        report["opted_in_policy"] = f"refuses: {exc}"
    report["planted"] = planted()
    report["attacks"] = attack_scores()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
