"""The unprivileged processes of a job, after init forks them: the program (runs the code,
then answers the checker's calls) and the checker (runs the tests). `run_program` wires their
descriptors, sets their limits, drops their privileges, then runs the code.
"""

from __future__ import annotations

import marshal
import os
import sys

from sandbox import checker as _checker
from sandbox.fences import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, ROOT, Fences
from sandbox.protocol import ENV, REPORT_FD, STATUS_FD, send

# Audit events the Python guard refuses (see sys.addaudithook).
DENIED_EVENTS = frozenset(
    """os.fork os.forkpty os.exec os.posix_spawn os.spawn os.system os.kill os.killpg
    subprocess.Popen socket.__new__ socket.connect socket.bind socket.getaddrinfo
    ctypes.dlopen ctypes.dlsym ctypes.cdata""".split()
)
# os functions the Python guard replaces.
DENIED_OS_FUNCTIONS = """fork forkpty system popen posix_spawn posix_spawnp kill killpg
    execv execve execl execle execlp execlpe execvp execvpe
    spawnl spawnle spawnlp spawnlpe spawnv spawnve spawnvp spawnvpe""".split()


def report_checker_output(job: dict) -> None:
    """The checker's captured stdout and stderr, one frame to the host on REPORT_FD."""
    cap = int(job["max_output"])
    record = {
        "i": job["i"],
        "stdout": sys.stdout.getvalue()[:cap],
        "stderr": sys.stderr.getvalue()[:cap],
    }
    blob = marshal.dumps(record)
    view = memoryview(len(blob).to_bytes(4, "little") + blob)
    while view:
        view = view[os.write(REPORT_FD, view) :]


def run_program(
    fences: Fences,
    job: dict,
    code: str,
    workdir,
    out_w: int,
    err_w: int,
    st_w: int,
    channel: tuple[int, int] | None,
    checker: bool,
) -> None:
    """An unprivileged process of the job: the program (`checker` False: runs the code and,
    for a test job, then answers the checker's calls) or the checker (runs the tests).
    Never returns. The steps run in this order: each needs the privileges the next drops."""
    try:
        wire_descriptors(fences, out_w, err_w, st_w, channel, checker)
        enter_workdir(fences, workdir, checker)
        set_limits(fences, job)
        path = [p for p in sys.path if p.startswith(sys.base_prefix)]
        if fences.root and not fences.mountns:
            path = reachable_path(path)  # while still root
        drop_privileges(fences, checker, workdir)
        reset_interpreter(path, workdir, checker)
        if job["python_guard"] and not checker:
            install_guard()
        report = job if checker else None
        del job, fences  # not to be found in this frame by the code it runs
    except BaseException as exc:
        os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(70)
    os._exit(execute(code, channel, checker, report) & 0xFF)


def wire_descriptors(fences: Fences, out_w, err_w, st_w, channel, checker: bool) -> None:
    """0 stdin (/dev/null), 1 stdout, 2 stderr, 3 status, then (4, 5) the checker channel
    and, in the checker, 6 its report to the host; every other descriptor closed."""
    import fcntl  # preloaded by main(): no file lookups after the fork

    # Copied above the targets first: a source may sit on another one's target number.
    sources = [os.open("/dev/null", os.O_RDONLY), out_w, err_w, st_w, *(channel or ())]
    if checker:
        sources.append(fences.report_fd)  # becomes REPORT_FD
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in sources]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(high), 1 << 20)


def enter_workdir(fences: Fences, workdir, checker: bool) -> None:
    """The private root's /tmp (chrooted), else the host temporary directory `workdir`. The
    checker's is the root instead, which the program cannot write (the private root is
    read-only; the host's belongs to root): nothing the program leaves in its directory is
    ever found relative to the checker's."""
    if not fences.root:
        os.setpgid(0, 0)  # its own group, so that `sweep` can kill it without killing us
    if fences.mountns:
        os.chroot(ROOT)
    os.chdir("/" if checker else "/tmp" if fences.mountns else workdir)


def set_limits(fences: Fences, job: dict) -> None:
    """The rlimits: CPU, address space, file size, descriptors, no core; processes where
    the uid is the sandbox's own (or a user namespace's)."""
    import resource  # preloaded by main()

    cpu = job["cpu_seconds"] or job["timeout"] + 1
    cpu = max(1, int(-(-cpu // 1)))
    memory = int(job["memory_mb"]) << 20
    disk = int(job["disk_mb"]) << 20
    for limit, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (disk, disk)),  # also bounds each memfd and shm file
        (resource.RLIMIT_NOFILE, (64, 64)),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(limit, value)
    if fences.root or fences.userns:
        nproc = int(job["max_processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def drop_privileges(fences: Fences, checker: bool, workdir=None) -> None:
    """The sandbox uid (root) or no capabilities (user namespace), no new privileges, then
    (without a private root) writes only in the program's own directory — none for the
    checker — and the seccomp filter."""
    if fences.root:
        os.setgroups([])
        os.setgid(fences.uid)
        os.setuid(fences.uid)
    elif fences.userns:
        fences.drop_capabilities()
    if checker:
        fences.prctl(PR_SET_DUMPABLE, 0)  # again: a uid change may have reset it
    fences.prctl(PR_SET_NO_NEW_PRIVS, 1)
    if fences.landlock:
        fences.confine_writes(None if checker else workdir)
    if fences.seccomp and not fences.install_seccomp():
        raise OSError("the seccomp filter could not be installed")


def reset_interpreter(path: list[str], workdir, checker: bool) -> None:
    """The environment, sys.path, argv and standard streams the code starts with."""
    os.environ.clear()
    os.environ.update(ENV)
    if workdir and not checker:
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
    if checker:
        # Only directories the program cannot write either (it has the checker's uid): an
        # interpreter under the host user's home, in modes without a uid of our own, leaves
        # the checker the modules it has already imported and nothing else.
        path = [entry for entry in path if not os.access(entry, os.W_OK)]
    sys.path[:] = path
    sys.argv[:] = ["program"]
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    if checker:
        import io

        # Kept, and sent to the host at the end: a failed test's traceback shows its
        # expected value, which must never reach the supervisor (see `main`).
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()


def execute(code: str, channel, checker: bool, report: dict | None) -> int:
    """Run the program (then serve the checker's calls) or the tests; the exit code."""
    import builtins
    import linecache

    name = "<tests>" if checker else "<program>"
    builtins.exit = builtins.quit = sys.exit  # `-S` skips site, which defines them
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    exit_code = 0
    try:
        if checker:
            _checker.check(code)
            send(STATUS_FD, "verdict passed")
        else:
            scope = {"__name__": "__main__", "__builtins__": builtins}
            exec(compile(code, name, "exec"), scope)
            send(STATUS_FD, "completed")
            if channel is not None:
                # Once the checker's verdict is in, this process may be killed before it exits:
                # what the program printed must already be out of its buffers by then.
                _checker.flush_output()
                _checker.serve(scope)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            exit_code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            exit_code = 1
        if checker and exit_code == 0:
            exit_code = 1  # the tests themselves never exit early to pass
    except MemoryError:
        send(STATUS_FD, "memory")
        os.write(2, b"MemoryError\n")
        exit_code = 1
    except BaseException as exc:
        try:
            print_own_frames(exc)
        except MemoryError:
            os.write(2, b"MemoryError\n")
        except BaseException:
            os.write(2, b"the program raised an exception (traceback unavailable)\n")
        exit_code = 1
    try:
        if report is not None:
            report_checker_output(report)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return exit_code


def print_own_frames(exc: BaseException) -> None:
    """The traceback without the sandbox's own frames, whose file names would show where the
    repository lies on the host: the code's, the tests' and the standard library's stay."""
    import traceback

    ours = os.path.dirname(_checker.__file__) + os.sep

    def own(summary: traceback.TracebackException) -> traceback.TracebackException:
        frames = [frame for frame in summary.stack if not frame.filename.startswith(ours)]
        summary.stack = traceback.StackSummary.from_list(frames)
        for chained in (summary.__cause__, summary.__context__):
            if chained is not None:
                own(chained)
        return summary

    summary = own(traceback.TracebackException(type(exc), exc, exc.__traceback__))
    sys.stderr.write("".join(summary.format()))


def reachable_path(path: list[str]) -> list[str]:
    """Import directories the program can still read after dropping root.

    The interpreter may live where only root can pass (pyenv under /root): a directory opened
    now, while we are root, stays reachable as /proc/self/fd/N, since the kernel checks
    permissions only below the opened directory.
    """
    reachable, moved = [], {}
    for entry in path:
        if os.path.isdir(entry):
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
            moved[entry] = f"/proc/self/fd/{fd}"
            reachable.append(moved[entry])
    # Packages imported already (encodings, collections...) find their submodules through
    # their own __path__, not sys.path: point those at the reachable copies too.
    for module in list(sys.modules.values()):
        package_path = getattr(module, "__path__", None)
        if not isinstance(package_path, list):
            continue
        for i, directory in enumerate(package_path):
            for old, new in moved.items():
                if directory.startswith(old + os.sep):
                    package_path[i] = new + directory[len(old) :]
                    break
    return reachable


def install_guard() -> None:
    """Second layer only: make the obvious escape hatches fail loudly at the Python level."""

    def denied(*_args, **_kwargs):
        raise PermissionError("not allowed in the Troupe sandbox")

    for name in DENIED_OS_FUNCTIONS:
        if hasattr(os, name):
            setattr(os, name, denied)

    def audit(event: str, _args) -> None:
        if event in DENIED_EVENTS:
            raise PermissionError(f"{event} is not allowed in the Troupe sandbox")

    sys.addaudithook(audit)
