"""Run model-written Python in a separate, fenced-off process and report what happened.

How a program runs
------------------
The host starts one *supervisor* (`python -I -S`, a scrubbed environment, its own session and
process group; the code is `trainer/tasks/_supervisor.py`) per batch of programs — a batch of
one is `run_program`. The supervisor sets up its fences once, then, per job, forks an init
that forks the program — and, for a test job, a *checker* first (`trainer/tasks/_checker.py`):

    host ── supervisor (root, host pid namespace)
              └── init (pid 1 of a fresh pid namespace; own mount and IPC namespaces, own
                  │     memory cgroup)
                  ├── checker (test jobs: runs the tests; non-dumpable; holds the verdict pipe)
                  └── program (an unprivileged uid of its own, rlimits, chroot, seccomp)

Forking from a warm supervisor costs a few milliseconds per program instead of a new
interpreter each, and no `preexec_fn` ever runs in the (multi-threaded) host.

No program is forked from a process that ever held tests: the host writes each job's code
and tests into an unlinked file and hands the supervisor only its descriptor, the limits and
where each text lies. A job's init reads its own program's code; its checker alone reads the
tests; init closes the file (and the checkers' report pipe) before it forks the program; and
the checker's output — a failed test's traceback shows the expected value — goes to the host
on that pipe, never through the supervisor. The supervisor is non-dumpable, so a program of
its uid (modes without `uid`) cannot ptrace it or open its descriptors either.

Who decides "passed"
--------------------
A test job (`run_tests`, `tests_job`) passes only on the checker's verdict. The checker runs
the trusted test code; each top-level name of the program is there a stand-in that calls the
program over a pipe pair and accepts only plain data back (None, bool, int, float, complex,
str, bytes, and lists, tuples, dicts, sets, frozensets of them; exact types, nested at most
100 deep). So these do not pass: an early `exit(0)`/`os._exit(0)`, writing "completed" (or
anything) to fd 3, returning an object whose `__eq__` always agrees or that is always true,
patching `assert`/AssertionError/builtins in the program, defining its own `abs`, `len` or
`math` for the tests to compare with (names that shadow a builtin are not handed to the
tests; standard-library module names are the checker's own imports), or raising
StopIteration into a test's loop (it reaches the tests as RuntimeError). The program cannot
reach the checker: the verdict pipe is never open in it, the checker is non-dumpable (no
ptrace, /proc/<pid>/mem or fd access for a same-uid process without capabilities), and the
tests never were in the memory the program inherits (see above: a program that scans its own
memory with process_vm_readv finds neither its batch's tests nor a failed test's traceback;
tested). What still holds for the program:
it sees the arguments the tests call it with, one call at a time; it may kill the checker (the job
then fails); a test that only checks truthiness (`assert f(x)`) passes on any non-empty
plain value, as in plain Python. Objects other than plain data and instances of the
program's own classes (e.g. a returned generator or a custom node class) are refused, and an
argument mutated in place comes back only for top-level list/dict/set arguments.
`run_program` jobs (no tests) pass on exit status 0; `require_completion` there relies on the
program's own, forgeable "completed" note.

What holds (kernel-enforced; `SandboxResult.isolation` lists the layers in force, and the
worker logs them when it starts: workers/sandbox_report.py)
------------------------------------------------------------------------------------------
- `uid`: the program runs as uid `UID_BASE + supervisor pid`, with no supplementary groups,
  no capabilities and PR_SET_NO_NEW_PRIVS. It cannot signal, ptrace, or read the memory or
  environment of the host or the supervisor, and RLIMIT_NPROC is enforced for its uid only.
- `rlimits`: RLIMIT_CPU, RLIMIT_AS (`memory_mb` of address space per process: memory bombs
  hit MemoryError), RLIMIT_NPROC, RLIMIT_FSIZE (`disk_mb`: also the largest file, memfd or
  shared-memory file), RLIMIT_NOFILE = 64, RLIMIT_CORE = 0.
- `seccomp`: a filter refuses memfd_create and the creation of System V shared memory,
  message queues and semaphore sets and of POSIX message queues (memory that no size limit
  of a mount bounds: 615 semaphore sets once held 1.2 GB of kernel memory under
  memory_mb=256), kernel keys, io_uring, userfaultfd, perf events and bpf (no use to a
  program; common exploit paths), fork, vfork and clone without CLONE_THREAD (each process
  would get its own address-space cap; threads share one) and every other ABI (i386/x32
  numbers). So without a memory cgroup a program's RAM is bounded by its address space
  (`memory_mb`), its private /tmp (`disk_mb`, with `mount`), the buffers of at most 64
  descriptors (pipes up to 1 MB each) and the kernel's per-thread structures of at most
  `max_processes` threads — as far as the deny list goes: a kernel object that it misses
  would not be bounded. The memory cgroup bounds everything; the compose workers lack one.
- `memcg`: a memory cgroup per job (cgroup v1 under our memory cgroup, or v2 beside our
  cgroup; needs root and a writable cgroup tree) caps everything the job's processes hold at
  `memory_mb`, its tmpfs files included, without swap. Over it, the kernel kills a process
  and the status is "memory".
- `pid`: init is pid 1 of a fresh pid namespace per job. When it exits or is killed, the
  kernel kills every process left in the namespace; host pids are invisible.
- `net`: a network namespace with only a downed loopback device: no connection leaves.
- `ipc`: a fresh IPC namespace per job (System V objects and POSIX message queues), gone
  with the job's last process; the next job of the batch sees nothing of it, and the host's
  objects are out of reach (with `seccomp` a program can create none itself).
- `mount`: the program is chrooted into a read-only skeleton holding only /usr, the
  interpreter's prefix, /dev/{null,zero,urandom} and a fresh size-limited tmpfs at /tmp — its
  working directory, which vanishes with the job. The repository, .env files, /etc, /dev/shm,
  home directories and other jobs' files are not visible; nothing outside /tmp is writable.
- `userns`: (non-root hosts) the namespaces above come from a user namespace.
- always: stdin is /dev/null; only PATH, LANG, LC_ALL, HOME, TMPDIR and PYTHONHASHSEED reach
  the program (never the parent's secrets); `-I -S`; stdout and stderr are each capped at
  `max_output` bytes (beyond it the run is stopped: `truncated`); the wall-clock timeout
  SIGKILLs init and so the whole pid namespace; init has PR_SET_PDEATHSIG=SIGKILL.
- Python guard (defence in depth, *not* a boundary): os.fork/exec/spawn/system/kill are
  replaced and an audit hook refuses sockets, subprocess, fork, exec and ctypes. Programs can
  get around it; the layers above are what hold.

What does NOT hold
------------------
- Not a boundary against kernel exploits: the seccomp filter is a deny list, not an allow
  list, and there is no VM. CPU is not shared fairly (no cpu cgroup).
- World-readable files under /usr and the interpreter prefix are readable.
- The test inputs a program is called with are visible to it (the expected values are not).
- A program's memory may hold what earlier programs of its batch printed (the supervisor
  read it), never their code or any test.
- The checker decodes the program's answers with marshal before checking their types; a
  crafted answer that crashes the (sandboxed) checker only fails the job.
- A program whose entry point is named like a builtin (`def sum(...)`) fails its tests: the
  tests call the builtin.

Modes (check `isolation`; tests/trainer/test_sandbox_modes.py runs the sandbox in each):
- root with CAP_SYS_ADMIN (CI here; the compose workers, which add that capability): all of
  uid, rlimits, pid, net, ipc, mount, seccomp, plus memcg where the cgroup tree is writable
  (here yes; in a Docker container, whose /sys/fs/cgroup is read-only, no).
- root without CAP_SYS_ADMIN (a default Docker container): uid, rlimits, seccomp (+ memcg
  where writable). No network isolation beyond the Python guard; the working directory is a
  host temporary directory (deleted after); world-writable host places (/tmp, /dev/shm) are
  writable and world-readable files visible; after each job the supervisor kills what is
  left of the sandbox uid and removes its System V objects and /dev/shm files. Below the
  default minimum: code tasks refuse to score.
- non-root with unprivileged user namespaces (any uid; tested as 65534 and 1000): rlimits,
  pid, net, ipc, mount, seccomp, userns; no uid (the program keeps the host user's uid,
  without any capability) and no memcg.
- non-root without them: rlimits and seccomp only; below the default minimum. The program
  then shares the host user's uid and pid namespace: it can signal or ptrace that user's
  processes, the host's among them (the supervisor alone is non-dumpable).

Minimum isolation for scoring
-----------------------------
`CodeTask` calls `require_isolation()` before it runs programs: unless every layer named in
TROUPE_SANDBOX_MIN_ISOLATION (comma-separated; default `DEFAULT_MIN_ISOLATION`: rlimits,
pid, net, ipc, mount, seccomp; "none" for nothing) is in force, it raises `SandboxTooWeak`
naming the missing layers — unless TROUPE_SANDBOX_ALLOW_WEAK=1.

API
---
`run_program(code, timeout=5.0, memory_mb=512, max_output=64_000, cpu_seconds=None)`,
`run_tests(program, tests, entry_point, **limits)` and `run_many(jobs, workers=2)` return
`SandboxResult`s whose status is one of: "passed" (exit 0 — for test jobs: the checker's
verdict), "failed" (non-zero exit, a failed test, or no verdict), "timeout" (wall clock or
CPU), "memory" (MemoryError under the address-space cap, or the memory cgroup's OOM killer)
or "crash" (killed by a signal, over the output cap, or the sandbox could not run it).
"""

from __future__ import annotations

import logging
import marshal
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainer.tasks import _supervisor

STATUSES = ("passed", "failed", "timeout", "memory", "crash")
LAYERS = ("uid", "rlimits", "pid", "net", "ipc", "mount", "memcg", "seccomp", "userns")
# What code tasks need by default: what the compose workers and a non-root host with user
# namespaces both give. Neither `uid` (needs root) nor `memcg` (needs a writable memory
# cgroup) is in it; require them with TROUPE_SANDBOX_MIN_ISOLATION where the host has them.
DEFAULT_MIN_ISOLATION = ("rlimits", "pid", "net", "ipc", "mount", "seccomp")
MIN_ISOLATION_ENV = "TROUPE_SANDBOX_MIN_ISOLATION"
ALLOW_WEAK_ENV = "TROUPE_SANDBOX_ALLOW_WEAK"
UID_BASE = _supervisor.UID_BASE
MAX_BATCH = 32  # programs per supervisor: bounds what one crash or overrun can take down


@dataclass(frozen=True)
class SandboxResult:
    status: str  # one of STATUSES
    returncode: int | None  # exit code, or -signal; None when it never finished on its own
    stdout: str
    stderr: str
    seconds: float  # wall clock of the program itself (supervisor start-up not included)
    truncated: bool = False  # stdout or stderr went over max_output and the run was stopped
    network_isolated: bool = False  # ran in its own network namespace
    isolation: tuple[str, ...] = ()  # layers in force: uid, rlimits, pid, net, ipc, mount, ...

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Job:
    """One program to run, with its limits."""

    code: str
    timeout: float = 5.0  # wall-clock seconds
    memory_mb: int = 512  # address-space cap, the interpreter's ~40 MB included
    max_output: int = 64_000  # bytes kept of stdout and of stderr each
    cpu_seconds: float | None = None  # default: the timeout rounded up, plus one
    disk_mb: int = 64  # size of the private /tmp, and the largest file it may write
    max_processes: int = 32  # processes + threads of the sandbox uid
    require_completion: bool = False  # an exit(0) before the code's end counts as failed
    python_guard: bool = True  # False only to test that the kernel layers hold on their own
    tests: str | None = None  # test code run by a separate checker process against `code`


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
    TROUPE_SANDBOX_ALLOW_WEAK=1 allows less); returns the layers in force."""
    layers = available_layers()
    missing = [n for n in required_layers(environ) if n not in layers]
    if missing and weak_allowed(environ):
        if tuple(missing) not in _warned:
            _warned.add(tuple(missing))
            logging.getLogger(__name__).warning(
                "code sandbox below its minimum (missing %s); scoring anyway: %s=1",
                ", ".join(missing),
                ALLOW_WEAK_ENV,
            )
    elif missing:
        raise SandboxTooWeak(
            f"the code sandbox here lacks the isolation layer(s) {', '.join(missing)} that "
            f"{MIN_ISOLATION_ENV} requires (in force: {', '.join(layers) or 'none'}). Run the "
            "worker as root with CAP_SYS_ADMIN (see docker-compose.yml) or with user "
            f"namespaces, lower {MIN_ISOLATION_ENV}, or set {ALLOW_WEAK_ENV}=1 to score anyway."
        )
    return layers


def run_program(
    code: str,
    *,
    timeout: float = 5.0,
    memory_mb: int = 512,
    max_output: int = 64_000,
    cpu_seconds: float | None = None,
    **limits,
) -> SandboxResult:
    """Run `code` as __main__ in the sandbox; "passed" iff it exits with status 0."""
    job = Job(code, timeout, memory_mb, max_output, cpu_seconds, **limits)
    return _run_batch([job])[0]


def compose_tests(tests: str | Sequence[str], entry_point: str = "") -> str:
    """What the checker runs: a check that `entry_point` exists, then the tests."""
    if not isinstance(tests, str):
        tests = "\n".join(tests)
    parts = []
    if entry_point:
        parts.append(
            f"if not callable(globals().get({entry_point!r})):\n"
            f"    raise NameError('the program does not define {entry_point}()')\n"
        )
    parts.append(tests.rstrip())
    return "\n".join(parts) + "\n"


def tests_job(program: str, tests: str | Sequence[str], entry_point: str = "", **limits) -> Job:
    """A Job that passes only if the checker ran every test against `program` and none failed."""
    return Job(program, tests=compose_tests(tests, entry_point), **limits)


def run_tests(
    program: str, tests: str | Sequence[str], entry_point: str = "", **limits
) -> SandboxResult:
    """Run `program`, then `tests` (assert lines, or a check program) in a checker process
    that calls the program's functions; "passed" only on the checker's own verdict."""
    return _run_batch([tests_job(program, tests, entry_point, **limits)])[0]


def run_many(jobs: Iterable[Job | str], workers: int = 2) -> list[SandboxResult]:
    """Run jobs (Job objects or code strings) on up to `workers` supervisors at a time.

    Jobs are dealt round-robin into batches of at most MAX_BATCH; each batch is one
    supervisor process, so the interpreter start-up is paid per batch, not per program.
    """
    jobs = [j if isinstance(j, Job) else Job(str(j)) for j in jobs]
    if not jobs:
        return []
    workers = max(1, int(workers))
    n_batches = max(min(workers, len(jobs)), -(-len(jobs) // MAX_BATCH))
    batches = [list(range(b, len(jobs), n_batches)) for b in range(n_batches)]
    results: list[SandboxResult | None] = [None] * len(jobs)

    def work(indices: list[int]) -> None:
        for i, res in zip(indices, _run_batch([jobs[i] for i in indices])):
            results[i] = res

    if len(batches) == 1 or workers == 1:
        for batch in batches:
            work(batch)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, batches))
    return results  # type: ignore[return-value]


def _launch_command() -> list[str]:
    # The supervisor is imported as a top-level module from its own directory, so its .pyc
    # is used and neither the trainer package nor this module's imports are loaded there.
    # The directory leaves sys.path at once: its math.py and code.py would shadow the
    # standard library's modules of those names.
    here = os.path.dirname(os.path.abspath(_supervisor.__file__))
    bootstrap = (
        f"import sys; sys.path.insert(0, {here!r}); import _supervisor; del sys.path[0]; "
        "_supervisor.main()"
    )
    return [sys.executable, "-I", "-S", "-c", bootstrap]


def _run_batch(jobs: list[Job]) -> list[SandboxResult]:
    """One supervisor process for `jobs`; a backstop deadline kills it if it overruns."""
    import selectors
    import tempfile

    # The code and tests go in an unlinked file that only each job's init (its own code)
    # and checker (its tests) read; the supervisor, which every program is forked from,
    # gets only where they lie (hole 1 of issue 29: a program read the tests of its batch
    # from the supervisor's memory).
    sources = tempfile.TemporaryFile(prefix="troupe-sandbox-")

    def place(text: str | None) -> tuple[int, int] | None:
        if text is None:
            return None
        data = str(text).encode("utf-8", "surrogatepass")
        offset = sources.tell()
        sources.write(data)
        return (offset, len(data))

    placed = [(place(j.code), place(j.tests)) for j in jobs]
    sources.flush()
    report_r, report_w = os.pipe()  # the checkers' output, straight from them to us
    payload = marshal.dumps(
        {
            "sources_fd": sources.fileno(),
            "report_fd": report_w,
            "jobs": [
                {
                    "code": code_at,
                    "timeout": float(j.timeout),
                    "memory_mb": int(j.memory_mb),
                    "max_output": int(j.max_output),
                    "cpu_seconds": None if j.cpu_seconds is None else float(j.cpu_seconds),
                    "disk_mb": int(j.disk_mb),
                    "max_processes": int(j.max_processes),
                    "require_completion": bool(j.require_completion),
                    "python_guard": bool(j.python_guard),
                    "tests": tests_at,
                }
                for j, (code_at, tests_at) in zip(jobs, placed)
            ],
        }
    )
    deadline = time.monotonic() + 10.0 + sum(j.timeout + 0.5 for j in jobs)
    cap = 65_536 + sum(2 * j.max_output * 4 + 4096 for j in jobs)  # utf-8 may grow replaced bytes
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            _launch_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(_supervisor.ENV),
            cwd="/",
            start_new_session=True,
            close_fds=True,
            pass_fds=(sources.fileno(), report_w),
        )
    except OSError as exc:
        sources.close()
        os.close(report_r)
        os.close(report_w)
        return [SandboxResult("crash", None, "", f"could not start the sandbox: {exc}", 0.0)] * len(
            jobs
        )

    sources.close()  # the supervisor has its own descriptor
    os.close(report_w)
    report = os.fdopen(report_r, "rb", buffering=0)
    out, err, checker_out = bytearray(), bytearray(), bytearray()
    killed = False
    try:
        proc.stdin.write(payload)  # the supervisor reads all of it before writing anything
        proc.stdin.close()
    except BrokenPipeError:
        pass
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        sel.register(report, selectors.EVENT_READ, checker_out)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(out) > cap:
                killed = True
                break
            for key, _ in sel.select(timeout=min(remaining, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif len(key.data) < cap:
                    key.data.extend(chunk)
    if killed:
        _kill_group(proc.pid)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
    _kill_group(proc.pid)  # whatever is left in the supervisor's group (nothing, normally)
    proc.stdout.close()
    proc.stderr.close()
    report.close()

    frames = _supervisor.read_frames(bytes(out))
    header = next((f for f in frames if "isolation" in f), {})
    by_index = {f["i"]: f for f in frames if "i" in f}
    checker_said = {f["i"]: f for f in _supervisor.read_frames(bytes(checker_out))}
    isolation = tuple(header.get("isolation", ()))
    problem = err.decode("utf-8", "replace")[-2000:]
    if killed:
        problem = f"the sandbox supervisor overran its deadline and was killed\n{problem}"
    results = []
    for i in range(len(jobs)):
        record = by_index.get(i)
        if record is None:
            record = {
                "status": "timeout" if killed else "crash",
                "returncode": None,
                "stdout": "",
                "stderr": problem or "the sandbox supervisor exited without a result",
                "seconds": round(time.monotonic() - started, 4),
                "truncated": False,
            }
        said = checker_said.get(i, {})  # the tests' own output and traceback come last
        results.append(
            SandboxResult(
                status=record["status"],
                returncode=record["returncode"],
                stdout=record["stdout"] + said.get("stdout", ""),
                stderr=record["stderr"] + said.get("stderr", ""),
                seconds=record["seconds"],
                truncated=record["truncated"],
                network_isolated="net" in isolation,
                isolation=isolation,
            )
        )
    return results


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
