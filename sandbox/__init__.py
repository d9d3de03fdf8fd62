"""Run model-written Python in a separate, fenced-off process and report what happened.

How a program runs
------------------
The host starts one *supervisor* (`python -I -S`, a scrubbed environment, its own session and
process group; the code is `sandbox/supervisor.py`) per batch of programs — a batch of
one is `run_program`. The supervisor sets up its fences once, then, per job, forks an init
that forks the program — and, for a test job, a *checker* first (`sandbox/checker.py`):

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
`math` for the tests to compare with (names that shadow a builtin, and dunder names such as
`__builtins__`, are not handed to the tests; the names of `checker.TEST_MODULES` are the
checker's own imports), or raising StopIteration into a test's loop (it reaches the tests
as RuntimeError). The checker takes nothing executable from the program: it reads the
program's messages as hostile bytes with a parser of plain data of its own
(`sandbox/plain.py`), never imports a module the program names (only the fixed table
TEST_MODULES: a module called `unittest.__main__` once ran test discovery in the program's
/tmp, inside the checker), and runs in `/` with a sys.path the program cannot write. Its
tracebacks leave out the sandbox's own frames: they never show the repository's host path.
The program cannot reach the checker: the verdict pipe is never open in it, the checker is
non-dumpable (no ptrace, /proc/<pid>/mem or fd access for a same-uid process without
capabilities), and the tests never were in the memory the program inherits (see above: a
program that scans its own memory with process_vm_readv finds neither its batch's tests nor
a failed test's traceback; tested).
What still holds for the program:
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
  memory_mb=256), secret memory (memfd_secret), POSIX timers and timerfds, inotify and
  fanotify instances (bounded per uid or per host at best, never per job), kernel
  keys, io_uring, userfaultfd, perf events and bpf (no use to a program; common exploit paths),
  fork, vfork and clone without CLONE_THREAD (each process
  would get its own address-space cap; threads share one) and every other ABI (i386/x32
  numbers). So without a memory cgroup a program's RAM is bounded by its address space
  (`memory_mb`), its private /tmp (`disk_mb`, with `mount`), the buffers of at most 64
  descriptors (pipes up to 1 MB each) and the kernel's per-thread structures of at most
  `max_processes` threads — as far as the deny list goes: a kernel object that it misses
  would not be bounded. Page tables, which no rlimit counts (sparse one-page mappings a
  gigabyte apart held +734 MB under memory_mb=256 in an attack), the supervisor reads every
  20 ms in every mode: over memory_mb / 8 it stops the job ("memory"). The memory cgroup
  bounds everything; the compose workers lack one.
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
- `landlock`: (modes without `mount`, Linux 5.13+) the program may change the file system
  only beneath its own working directory (and write /dev/null); the checker nowhere.
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
- Without a memory cgroup, page tables are bounded after the fact: a job may overshoot its
  memory_mb / 8 by what it maps in 20 ms (a few MB from Python, tens of MB at C speed).
- A program whose entry point is named like a builtin (`def sum(...)`) fails its tests: the
  tests call the builtin.

Modes (check `isolation`; tests/sandbox/test_sandbox_modes.py runs the sandbox in each):
- root with CAP_SYS_ADMIN (CI here; the compose workers, which add that capability): all of
  uid, rlimits, pid, net, ipc, mount, seccomp, plus memcg where the cgroup tree is writable
  (here yes; in a Docker container, whose /sys/fs/cgroup is read-only, no).
- root without CAP_SYS_ADMIN (a default Docker container): uid, rlimits, seccomp, landlock
  (+ memcg where writable). No network isolation beyond the Python guard; the working
  directory is a private, emptied host temporary directory (deleted after) and, with
  `landlock`, the only place the program may write (the checker writes nowhere): the host's
  /tmp, /var/tmp and /dev/shm are not (a program once planted 66 module-named files there).
  World-readable files are visible; after each job the supervisor kills what is left of the
  sandbox uid and removes its System V objects and /dev/shm files. Below the default
  minimum: code tasks refuse to score, and keep refusing with a lowered minimum, unless
  TROUPE_SANDBOX_ALLOW_WEAK=1 opts in — and without `landlock` even then.
- non-root with unprivileged user namespaces (any uid; tested as 65534 and 1000): rlimits,
  pid, net, ipc, mount, seccomp, userns; no uid (the program keeps the host user's uid,
  without any capability) and no memcg.
- non-root without them: rlimits, seccomp and landlock only; below the default minimum. The
  program then shares the host user's uid and pid namespace: it can signal or ptrace that
  user's processes, the host's among them (the supervisor alone is non-dumpable).

Minimum isolation for scoring
-----------------------------
`CodeTask` calls `require_isolation()` before it runs programs: unless every layer named in
TROUPE_SANDBOX_MIN_ISOLATION (comma-separated; default `DEFAULT_MIN_ISOLATION`: rlimits,
pid, net, ipc, mount, seccomp; "none" for nothing) and `mount` in any case is in force, it
raises `SandboxTooWeak` naming the missing layers and what a program can do without each —
unless TROUPE_SANDBOX_ALLOW_WEAK=1. With neither `mount` nor `landlock` (nothing keeps the
program's writes inside its job) it refuses whatever the variables say.

API
---
`run_program(code, timeout=5.0, memory_mb=512, max_output=64_000, cpu_seconds=None)`,
`run_tests(program, tests, entry_point, **limits)` and `run_many(jobs, workers=2)` return
`SandboxResult`s whose status is one of: "passed" (exit 0 — for test jobs: the checker's
verdict), "failed" (non-zero exit, a failed test, or no verdict), "timeout" (wall clock or
CPU), "memory" (MemoryError under the address-space cap, or the memory cgroup's OOM killer)
or "crash" (killed by a signal, over the output cap, or the sandbox could not run it).
"""

from sandbox.fences import UID_BASE
from sandbox.host import (
    MAX_BATCH,
    STATUSES,
    Job,
    SandboxResult,
    compose_tests,
    run_many,
    run_program,
    run_tests,
    tests_job,
)
from sandbox.isolation import (
    ALLOW_WEAK_ENV,
    DEFAULT_MIN_ISOLATION,
    LAYERS,
    MIN_ISOLATION_ENV,
    SandboxTooWeak,
    available_layers,
    require_isolation,
    required_layers,
    weak_allowed,
)

__all__ = [
    "ALLOW_WEAK_ENV",
    "DEFAULT_MIN_ISOLATION",
    "LAYERS",
    "MAX_BATCH",
    "MIN_ISOLATION_ENV",
    "STATUSES",
    "UID_BASE",
    "Job",
    "SandboxResult",
    "SandboxTooWeak",
    "available_layers",
    "compose_tests",
    "require_isolation",
    "required_layers",
    "run_many",
    "run_program",
    "run_tests",
    "tests_job",
    "weak_allowed",
]
