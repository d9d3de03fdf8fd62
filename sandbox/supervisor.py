"""The process side of the sandbox: the supervisor that fences in and runs programs.

The host (`sandbox.host`) starts it as `python -I -S -c "..."` with a scrubbed environment,
loading this module and its siblings (`fences`, `seccomp`, `cgroups`, `program`, `checker`,
`protocol`) as submodules of a bare `sandbox` package: the host's `sandbox/__init__.py` is
not run there and nothing is put on sys.path. It reads a marshalled batch of jobs on stdin
and writes one marshalled record per job on stdout. The batch holds limits and offsets only:
each job's code and tests stay in a host file that this process never reads (see `main`).
What it protects against, and what not, is documented in `sandbox/__init__.py`.

It imports only cheap standard-library modules (no json, re, dataclasses, selectors): its
start-up is paid once per batch, and every program is forked from it.

Process tree of one job (full mode, running as root with CAP_SYS_ADMIN):

    supervisor ── init (pid 1 of a fresh pid namespace; own mount and IPC namespaces,
                   │    private /tmp, own memory cgroup)
                   ├── checker (test jobs only: runs the tests, calls the program; see
                   │            checker.py; its verdict goes on a pipe only it holds)
                   └── program (uid UID_BASE + supervisor pid, rlimits, chroot, seccomp)
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import sys
import time

from sandbox.cgroups import cgroup_ooms, make_job_cgroup, remove_cgroup, write_file
from sandbox.fences import (
    CLONE_NEWIPC,
    CLONE_NEWNS,
    IPC_RMID,
    MS_NODEV,
    MS_NOSUID,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    ROOT,
    Fences,
)
from sandbox.program import run_program
from sandbox.protocol import send, write_frame

# Imported once per batch (if the batch is large enough) so programs get them for free.
PRELOAD = (
    "re math collections itertools functools heapq bisect string typing operator copy "
    "fractions random"
).split()
PRELOAD_MIN_JOBS = 4
# Page tables are kernel memory that no rlimit counts: one-page mappings a gigabyte apart cost
# ~8 KB each, and 65,530 of them (vm.max_map_count) fit in 256 MB of address space (+734 MB
# in an attack). Without a memory cgroup nothing else bounds them, so the supervisor reads them
# every PAGE_TABLE_TICK seconds and stops a job whose processes hold more than memory_mb /
# PAGE_TABLE_SHARE (a dense 512 MB heap needs ~1 MB). The overshoot is what a program maps
# in one tick: a few MB from Python, tens of MB at C speed.
PAGE_TABLE_SHARE = 8
PAGE_TABLE_TICK = 0.02


def main() -> None:
    """Entry point: run every job of the batch on stdin, one result frame each on stdout."""
    import fcntl  # noqa: F401  (programs set up their file descriptors with it)
    import linecache  # noqa: F401
    import resource  # noqa: F401  (imported here once, for every program)
    import traceback  # noqa: F401  (failing programs print one; importing it costs ~1 ms)

    fences = Fences()
    fences.setup()
    # The batch on stdin holds only limits and where each job's code and tests lie in the
    # host's file (fd `sources_fd`): no program code or test ever enters this process, the
    # one every program is forked from, and the checkers' output (a failed test's traceback
    # shows its expected value) goes to the host on `report_fd` without passing through us.
    # Non-dumpable (after setup: the uid map is written through /proc/self): a program of
    # our own uid (no `uid` layer) can neither ptrace us nor open those fds in /proc.
    fences.prctl(PR_SET_DUMPABLE, 0)
    request = marshal.loads(sys.stdin.buffer.read())
    fences.sources_fd, fences.report_fd = request["sources_fd"], request["report_fd"]
    if fences.outer_pidns:
        # Unprivileged: only the pid namespace's first process can reset it per job (setns
        # needs CAP_SYS_ADMIN over the namespace), so carry on in a child that is its pid 1.
        child = os.fork()
        if child:
            os._exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) & 0xFF)
        fences.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        fences.pidns = fences._enable_pidns()
        if fences.pidns:
            fences.prctl(PR_SET_CHILD_SUBREAPER, 0)
        fences.update_layers()
    if len(request["jobs"]) >= PRELOAD_MIN_JOBS:
        for name in PRELOAD:
            __import__(name)
    out = sys.stdout.buffer
    write_frame(out, {"isolation": fences.layers, "uid": fences.uid})
    import gc

    gc.freeze()  # the forks then share our objects: the collector no longer touches their pages
    for index, job in enumerate(request["jobs"]):
        try:
            record = run_job(fences, dict(job, i=index), index)
        except Exception as exc:  # a supervisor bug must not lose the other jobs' results
            record = result("crash", None, b"", f"sandbox error: {exc!r}".encode(), 0.0)
        record["i"] = index
        write_frame(out, record)


def result(status, returncode, stdout: bytes, stderr: bytes, seconds, truncated=False) -> dict:
    return {
        "status": status,
        "returncode": returncode,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "seconds": round(seconds, 4),
        "truncated": truncated,
    }


def run_job(fences: Fences, job: dict, index: int = 0) -> dict:
    if fences.mountns:
        return run_in(fences, job, None, index)  # its /tmp is a fresh tmpfs, gone with the run
    import shutil
    import tempfile

    workdir = tempfile.mkdtemp(prefix="troupe-sandbox-")
    try:
        if fences.root:
            os.chown(workdir, fences.uid, fences.uid)
        return run_in(fences, job, workdir, index)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_in(fences: Fences, job: dict, workdir: str | None, index: int = 0) -> dict:
    """Run one job with `workdir` (None: the private /tmp) as its working directory."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()  # checker -> supervisor: the verdict; never given to the program
    nt_r, nt_w = os.pipe()  # program -> supervisor: its own notes ("completed", "memory")
    rp_r, rp_w = os.pipe()  # init -> supervisor; closed in the program before any user code
    pidns = fences.pidns and fences.new_pid_namespace()
    cgroup = make_job_cgroup(fences.cgroup, index, job["memory_mb"])
    started = time.monotonic()
    init = os.fork()
    if init == 0:
        for fd in (out_r, err_r, st_r, nt_r, rp_r):
            os.close(fd)
        pipes = (out_w, err_w, st_w, nt_w, rp_w)
        run_init(fences, job, workdir, pidns, cgroup, pipes)  # never returns
    for fd in (out_w, err_w, st_w, nt_w, rp_w):
        os.close(fd)

    data = {fd: bytearray() for fd in (out_r, err_r, st_r, nt_r, rp_r)}
    init, timed_out, overflow, page_tables = watch(fences, job, init, pidns, data, started)
    seconds = time.monotonic() - started
    end(fences, init, pidns, data, stop=timed_out or overflow or bool(page_tables))
    ooms = cgroup_ooms(cgroup)
    remove_cgroup(cgroup)  # empty now: its processes are gone, and its tmpfs with them
    for fd in data:
        os.close(fd)
    return classify(
        job,
        Observed(
            bytes(data[rp_r]),
            bytes(data[st_r]),
            bytes(data[nt_r]),
            bytes(data[out_r]),
            bytes(data[err_r]),
            seconds,
            timed_out,
            overflow,
            ooms,
            page_tables,
        ),
    )


def watch(fences: Fences, job: dict, init: int, pidns: bool, data: dict, started: float):
    """The supervision loop: collect the job's pipes (`data`: stdout, stderr, verdict, notes,
    init's report, in that order) until init has exited and the output is closed, the
    deadline passes, the output goes over its cap, or the job's page tables go over theirs.
    Returns (init's pid, or -1 once reaped here; timed out; overflow; the page tables' kB
    when over their cap, else 0)."""
    cap = job["max_output"]
    out_r, err_r, _, _, rp_r = data
    poller = select.poll()
    for fd in data:
        poller.register(fd, select.POLLIN)
    try:
        pidfd = os.pidfd_open(init)
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):  # kernels before 5.3: poll waitpid instead
        pidfd = None
    open_fds = set(data)
    deadline = started + job["timeout"]
    timed_out = overflow = init_done = False
    grace_until = None
    page_table_cap = (int(job["memory_mb"]) << 10) // PAGE_TABLE_SHARE  # kB
    page_tables, next_look = 0, started + PAGE_TABLE_TICK
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if now >= next_look and init > 0 and not init_done:
            next_look = now + PAGE_TABLE_TICK
            held = page_tables_kb()
            if held > page_table_cap:
                page_tables = held
                break
        if init_done and (not open_fds & {out_r, err_r} or (grace_until and now >= grace_until)):
            break  # without a pid namespace leftovers may hold the pipes: stop after a grace
        looking = init > 0 and not init_done
        wait = max(0.0, (min(deadline, next_look) if looking else deadline) - now)
        if pidfd is None or grace_until:
            wait = min(wait, 0.01)
        for fd, _ in poller.poll(wait * 1000):
            if fd == pidfd:
                poller.unregister(pidfd)
                init_done = True
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                continue
            buf = data[fd]
            buf.extend(chunk)
            if len(buf) > cap:
                del buf[cap:]
                overflow = fd in (out_r, err_r)
        if overflow:
            break
        if pidfd is None and not init_done and os.waitpid(init, os.WNOHANG)[0]:
            init_done, init = True, -1
        if init_done and grace_until is None and not pidns:
            if init > 0:
                os.waitpid(init, 0)  # it has exited; reap it here, not in the sweep's reaping
                init = -1
            sweep(fences, data[rp_r])
            grace_until = time.monotonic() + 0.2
    if pidfd is not None:
        os.close(pidfd)
    return init, timed_out, overflow, page_tables


def page_tables_kb() -> int:
    """Kilobytes of page tables held by our children's children: the job's program and
    checker (with seccomp they cannot start more; threads share their page tables). Read
    through /proc, the host's mount even where we live in a pid namespace of our own, so
    every pid is taken from /proc itself, never from fork()."""
    total = 0
    for init in _children(os.readlink("/proc/self")):
        for pid in _children(init):
            try:
                with open(f"/proc/{pid}/status", "rb") as fh:
                    for line in fh:
                        if line.startswith(b"VmPTE:"):
                            total += int(line.split()[1])
                            break
            except (OSError, ValueError):
                continue  # already gone
    return total


def _children(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return fh.read().split()
    except OSError:
        return []


def end(fences: Fences, init: int, pidns: bool, data: dict, stop: bool) -> None:
    """Stop the job (`stop`: it overran) and wait until init, and with it every process of
    the job, is gone; then read what the verdict, notes and report pipes still hold."""
    _, _, st_r, nt_r, rp_r = data
    if stop:
        if not pidns:
            data[rp_r].extend(drain(rp_r))
            if init in sweep(fences, data[rp_r]):  # the program first, so init can reap it
                init = -1  # already reaped by the sweep: its pid is no longer ours to kill
        kill(init)  # init is pid 1 of the program's namespace: the kernel kills everything in it
    if init > 0:
        try:
            os.waitpid(init, 0)  # returns once init, and with it its pid namespace, is gone
        except ChildProcessError:
            pass
    for fd in (st_r, nt_r, rp_r):
        data[fd].extend(drain(fd))
    if not pidns:
        sweep(fences, data[rp_r])
        reap_orphans()


class Observed:
    """What the supervisor saw of one job: init's report, the checker's verdict, the
    program's own (untrusted) notes, the output, and how it ended."""

    def __init__(
        self, report, verdict, notes, stdout, stderr, seconds, timed_out, overflow, ooms, pte=0
    ):
        self.report, self.verdict, self.notes = report, verdict, notes
        self.stdout, self.stderr, self.seconds = stdout, stderr, seconds
        self.timed_out, self.overflow, self.ooms = timed_out, overflow, ooms
        self.page_tables = pte  # kB, when over the job's cap


def classify(job: dict, seen: Observed) -> dict:
    lines = seen.report.decode("utf-8", "replace").splitlines()
    notes = set(seen.notes.decode("utf-8", "replace").split())
    stdout, stderr, seconds = seen.stdout, seen.stderr, seen.seconds
    errors = [line[6:] for line in lines if line.startswith("error ")]
    ends = [line.split() for line in lines if line.startswith(("exit ", "signal "))]
    program_ends = [line.split()[1:] for line in lines if line.startswith("candidate ")]
    if errors:
        return result("crash", None, stdout, stderr + errors[0].encode(), seconds)
    if seen.timed_out:
        return result("timeout", None, stdout, stderr, seconds)
    if seen.overflow:
        note = f"\n[sandbox: output over {job['max_output']} bytes; run stopped]".encode()
        return result("crash", None, stdout, stderr + note, seconds, truncated=True)
    if seen.page_tables:
        cap = int(job["memory_mb"]) // PAGE_TABLE_SHARE
        note = f"\n[sandbox: page tables over {cap} MB ({seen.page_tables} kB); run stopped]"
        return result("memory", None, stdout, stderr + note.encode(), seconds)
    if not ends:
        return result("crash", None, stdout, stderr + b"[sandbox: no exit report]", seconds)
    kind, value = ends[-1][0], int(ends[-1][1])
    memory = (
        seen.ooms > 0 or "memory" in notes or stderr.rstrip().endswith(b"MemoryError")
    )  # the notes only ever turn one failure into another
    if seen.ooms:  # whichever process the kernel killed, the job went over its memory
        note = b"\n[sandbox: over the memory cgroup's limit; the kernel killed a process]"
        returncode = -value if kind == "signal" else value
        return result("memory", returncode, stdout, stderr + note, seconds)
    if program_ends and program_ends[-1] == ["signal", str(int(signal.SIGXCPU))]:
        return result("timeout", None, stdout, stderr, seconds)
    if kind == "signal":
        status_ = "timeout" if value == signal.SIGXCPU else ("memory" if memory else "crash")
        return result(status_, -value, stdout, stderr, seconds)
    if value != 0:
        return result("memory" if memory else "failed", value, stdout, stderr, seconds)
    if job.get("tests") is not None:
        # The only "passed" of a test job: the checker's own verdict, on a pipe the program
        # never holds, after the tests ran to their end in the checker's process.
        if seen.verdict.split() != [b"verdict", b"passed"]:
            note = b"[sandbox: the checker gave no verdict]"
            return result("failed", value, stdout, stderr + note, seconds)
        return result("passed", value, stdout, stderr, seconds)
    if job["require_completion"] and "completed" not in notes:
        note = b"[sandbox: the program exited before its end]"
        return result("failed", value, stdout, stderr + note, seconds)
    return result("passed", value, stdout, stderr, seconds)


def drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = bytearray()
    while len(data) < 1 << 20:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data)


def kill(pid: int) -> None:
    if pid > 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def sweep(fences: Fences, report: bytes) -> list[int]:
    """Without a pid namespace: kill whatever the program left behind; the pids reaped."""
    reaped: list[int] = []
    if not fences.root:
        # We share the host user's uid: only the program's own process group is ours to kill.
        for line in report.decode("utf-8", "replace").splitlines():
            if line.startswith("program "):
                try:
                    os.killpg(int(line.split()[1]), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        return reaped
    # The uid is this sandbox's alone: kill all its processes, reap those handed to us as
    # subreaper, and repeat until none is left (a fork bomb may still be dying).
    deadline = time.monotonic() + 2.0
    while True:
        pid = os.fork()
        if pid == 0:
            try:
                os.setgid(fences.uid)
                os.setuid(fences.uid)
                os.kill(-1, signal.SIGKILL)  # every process of the sandbox uid but this one
                remove_ipc_of(fences, fences.uid)  # no IPC namespace: what it made is shared
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        reaped += reap_orphans()
        if not processes_of(fences.uid) or time.monotonic() > deadline:
            return reaped
        time.sleep(0.005)


def remove_ipc_of(fences: Fences, uid: int) -> None:
    """Without a job's own IPC namespace: remove the System V objects and POSIX shared memory
    (/dev/shm) that `uid` owns, so nothing a program made outlives it. Runs as `uid`."""
    for table, remove in (
        ("shm", lambda ident: fences.libc.shmctl(ident, IPC_RMID, None)),
        ("sem", lambda ident: fences.libc.semctl(ident, 0, IPC_RMID)),
        ("msg", lambda ident: fences.libc.msgctl(ident, IPC_RMID, None)),
    ):
        try:
            with open(f"/proc/sysvipc/{table}") as fh:
                rows = [line.split() for line in fh.readlines()[1:]]
        except OSError:
            continue
        owner_column = {"shm": 7, "sem": 4, "msg": 7}[table]
        for row in rows:
            try:
                if int(row[owner_column]) == uid:
                    remove(int(row[1]))
            except (IndexError, ValueError):
                continue
    try:
        for entry in os.scandir("/dev/shm"):
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    os.unlink(entry.path)
            except OSError:
                continue
    except OSError:
        pass


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is `uid` (zombies included)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdecimal():
            try:
                with open(f"/proc/{name}/status", "rb") as fh:
                    for line in fh:
                        if line.startswith(b"Uid:"):
                            if int(line.split()[1]) == uid:
                                found.append(int(name))
                            break
            except (OSError, ValueError):
                continue
    return found


def reap_orphans() -> list[int]:
    """Collect exited orphans handed to us as child subreaper (no pid namespace)."""
    reaped = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


def run_init(fences: Fences, job: dict, workdir, pidns: bool, cgroup, pipes: tuple) -> None:
    """pid 1 of the program's namespace: cgroup, IPC namespace, private /tmp, fork, reap."""
    out_w, err_w, st_w, nt_w, rp_w = pipes
    try:
        fences.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a killed supervisor takes us along
        code = read_source(fences.sources_fd, job["code"])  # this job's program, nothing else
        if cgroup is not None and not write_file(f"{cgroup}/cgroup.procs", "0"):
            raise OSError("could not enter the job's memory cgroup")
        flags = (CLONE_NEWNS if fences.mountns else 0) | (CLONE_NEWIPC if fences.ipc_per_job else 0)
        if flags and not fences.unshare(flags):
            raise OSError(fences.ctypes.get_errno(), f"unshare({flags:#x}) failed")
        if fences.ipc_per_job:
            limit_ipc(int(job["disk_mb"]))
        if fences.mountns:
            owner = fences.uid  # unprivileged, our own uid: mapped to itself in the namespace
            disk = int(job["disk_mb"])
            fences.mount(
                "tmpfs",
                ROOT + "/tmp",
                "tmpfs",
                MS_NOSUID | MS_NODEV,
                f"size={disk}m,nr_inodes=4096,mode=0700,uid={owner},gid={owner}",
            )
        checker = None
        if job.get("tests") is not None:
            req_r, req_w = os.pipe()  # checker -> program: calls
            ans_r, ans_w = os.pipe()  # program -> checker: plain-data answers
            # The checker is born non-dumpable: the program (same uid, no capabilities) can
            # then neither ptrace it nor open its /proc/<pid>/mem or fds.
            fences.prctl(PR_SET_DUMPABLE, 0)
            checker = os.fork()
            if checker == 0:
                for fd in (rp_w, nt_w, req_r, ans_w):
                    os.close(fd)
                tests = read_source(fences.sources_fd, job["tests"])  # only ever read here
                run_program(fences, job, tests, workdir, out_w, err_w, st_w, (ans_r, req_w), True)
            close_host_fds(fences)  # before the program exists: it must never reach them
            fences.prctl(PR_SET_DUMPABLE, 1)
            send(rp_w, f"program {checker}")
            os.close(st_w)
            program = os.fork()
            if program == 0:
                for fd in (rp_w, req_w, ans_r):
                    os.close(fd)
                run_program(fences, job, code, workdir, out_w, err_w, nt_w, (req_r, ans_w), False)
            for fd in (req_r, req_w, ans_r, ans_w):
                os.close(fd)
        else:
            os.close(st_w)
            close_host_fds(fences)
            fences.prctl(PR_SET_DUMPABLE, 1)  # as in a test job: the program as before
            program = os.fork()
            if program == 0:
                os.close(rp_w)
                run_program(fences, job, code, workdir, out_w, err_w, nt_w, None, False)
        send(rp_w, f"program {program}")
        for fd in (out_w, err_w, nt_w):
            os.close(fd)
        main_pid = checker or program  # the process whose end is the job's end
        alive = {main_pid, program}
        while main_pid in alive:  # as pid 1 we also reap orphans
            pid, wait_status = os.wait()
            if pid == main_pid:
                ended = wait_status
            elif pid == program:
                how = "signal" if os.WIFSIGNALED(wait_status) else "exit"
                code = os.WTERMSIG(wait_status) if how == "signal" else wait_status >> 8
                send(rp_w, f"candidate {how} {code}")
            alive.discard(pid)
        if program in alive:
            kill(program)  # the checker is done: the program it called has nothing left to do
        if os.WIFSIGNALED(ended):
            send(rp_w, f"signal {os.WTERMSIG(ended)}")
        else:
            send(rp_w, f"exit {os.waitstatus_to_exitcode(ended)}")
    except BaseException as exc:
        send(rp_w, f"error sandbox init failed: {exc!r}")
    finally:
        os._exit(0)


def read_source(fd: int, where: tuple[int, int]) -> str:
    """One job's code or tests from the host's file: `where` is (offset, length) in bytes."""
    offset, length = where
    data = bytearray()
    while len(data) < length:
        chunk = os.pread(fd, length - len(data), offset + len(data))
        if not chunk:
            raise OSError("the host's file of code and tests is cut short")
        data.extend(chunk)
    return data.decode("utf-8", "surrogatepass")


def close_host_fds(fences: Fences) -> None:
    for fd in (fences.sources_fd, fences.report_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def limit_ipc(disk_mb: int) -> None:
    """In the job's own IPC namespace: System V shared memory up to `disk_mb` in all (the
    memory cgroup, where present, bounds it anyway), and no POSIX message queues."""
    pages = max(1, (disk_mb << 20) // os.sysconf("SC_PAGE_SIZE"))
    for name, value in (
        ("kernel/shmmax", disk_mb << 20),
        ("kernel/shmall", pages),
        ("kernel/shmmni", 64),
        ("fs/mqueue/queues_max", 0),
    ):
        write_file(f"/proc/sys/{name}", str(value))
