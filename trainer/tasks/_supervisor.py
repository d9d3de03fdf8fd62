"""The process side of `trainer.tasks.sandbox`: the supervisor that fences in and runs programs.

The host starts this module as `python -I -S -c "...; _supervisor.main()"` with a scrubbed
environment; it reads a marshalled batch of jobs on stdin and writes one marshalled record per
job on stdout. What it protects against, and what not, is documented in `sandbox.py`.

It imports only cheap standard-library modules (no json, re, dataclasses, selectors): its
start-up is paid once per batch, and every program is forked from it.

Process tree of one job (full mode, running as root with CAP_SYS_ADMIN):

    supervisor ── init (pid 1 of a fresh pid namespace; own mount namespace, private /tmp)
                   └── program (uid UID_BASE + supervisor pid, rlimits, chroot, no caps)
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
import time

UID_BASE = 2_000_000_000  # + supervisor pid (< 2**22): a uid no real account uses
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_SECUREBITS, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 28, 36, 38
SECBITS_LOCKED_NOROOT = 0x2F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and their locks
ROOT = "/tmp"  # where the skeleton root is mounted, inside the supervisor's mount namespace
STATUS_FD = 3  # the program's status pipe: "completed" (tests ran to the end), "memory"
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
}
# Imported once per batch (if the batch is large enough) so programs get them for free.
PRELOAD = (
    "re math collections itertools functools heapq bisect string typing operator copy "
    "fractions random"
).split()
PRELOAD_MIN_JOBS = 4
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


def write_frame(stream, record: dict) -> None:
    blob = marshal.dumps(record)
    stream.write(len(blob).to_bytes(4, "little") + blob)
    stream.flush()


def read_frames(data: bytes) -> list[dict]:
    """Split a stream of length-prefixed marshal frames; a cut-off last frame is dropped."""
    records, at = [], 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "little")
        if at + 4 + size > len(data):
            break
        records.append(marshal.loads(data[at + 4 : at + 4 + size]))
        at += 4 + size
    return records


class Fences:
    """The isolation the supervisor managed to set up, and the privileged calls it needs."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.root = os.geteuid() == 0
        self.uid = UID_BASE + os.getpid() if self.root else os.geteuid()
        self.userns = self.netns = self.mountns = self.pidns = False
        self.outer_pidns = False  # unprivileged: the pid namespace `main` must fork into
        self.pid_reset_fd: int | None = None
        self.layers: list[str] = []

    def unshare(self, flags: int) -> bool:
        return self.libc.unshare(flags) == 0

    def mount(self, source, target, fstype, flags: int, data=None) -> None:
        def enc(s):
            return s.encode() if isinstance(s, str) else s

        if self.libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            errno = self.ctypes.get_errno()
            raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")

    def prctl(self, option: int, value: int) -> None:
        self.libc.prctl(option, value, 0, 0, 0)

    def setup(self) -> None:
        """Enter new namespaces and build the skeleton root, as far as the kernel allows."""
        others = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        if self.root:
            if self.unshare(CLONE_NEWNS | others):
                self.netns = True
                self.mountns = self._try_build_root()
                self.pidns = self._enable_pidns()
            elif self.unshare(CLONE_NEWNET):
                self.netns = True
        else:
            # Unprivileged: a user namespace (where the kernel allows one) buys the same
            # namespaces; the program keeps our uid but loses every capability.
            for flags in (CLONE_NEWNS | CLONE_NEWPID | others, CLONE_NEWNS | others, others):
                if self.unshare(CLONE_NEWUSER | flags):
                    self.userns = self.netns = True
                    self._map_ids()
                    self.mountns = bool(flags & CLONE_NEWNS) and self._try_build_root()
                    # Our pid namespace starts with our first child: `main` forks into it.
                    self.outer_pidns = bool(flags & CLONE_NEWPID)
                    break
        if not self.pidns:
            # Orphans of a program then come to us rather than to the host's pid 1 (which,
            # in a container, may never reap them), and `reap_orphans` collects them.
            self.prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.update_layers()

    def update_layers(self) -> None:
        self.layers = [
            name
            for name, on in (
                ("uid", self.root),
                ("rlimits", True),
                ("pid", self.pidns),
                ("net", self.netns),
                ("ipc", self.netns),
                ("mount", self.mountns),
                ("userns", self.userns),
            )
            if on
        ]

    def _map_ids(self) -> None:
        uid, gid = os.geteuid(), os.getegid()  # ourselves, unchanged, inside the namespace
        try:
            for path, text in (
                ("/proc/self/setgroups", "deny"),
                ("/proc/self/uid_map", f"{uid} {uid} 1"),
                ("/proc/self/gid_map", f"{gid} {gid} 1"),
            ):
                with open(path, "w") as fh:
                    fh.write(text)
        except OSError:
            pass

    def _try_build_root(self) -> bool:
        try:
            self._build_root()
            return True
        except OSError as exc:
            sys.stderr.write(f"sandbox: no private root ({exc}); using a host temp dir\n")
            self.libc.umount2(ROOT.encode(), 2)  # MNT_DETACH: give back the host's /tmp
            return False

    def _enable_pidns(self) -> bool:
        """A process may unshare(CLONE_NEWPID) once; setns() back to our own pid namespace
        first lets each job get a fresh one without an extra process per job."""
        try:
            fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        if self.libc.setns(fd, CLONE_NEWPID) != 0:
            os.close(fd)
            return False
        self.pid_reset_fd = fd
        return True

    def new_pid_namespace(self) -> bool:
        return (
            self.pid_reset_fd is not None
            and self.libc.setns(self.pid_reset_fd, CLONE_NEWPID) == 0
            and self.unshare(CLONE_NEWPID)
        )

    def _build_root(self) -> None:
        """A read-only skeleton: /usr, the interpreter prefix, /dev/{null,zero,urandom}, /tmp."""
        self.mount(None, "/", None, MS_REC | MS_PRIVATE)
        self.mount("tmpfs", ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        binds = ["/usr"]
        prefix = os.path.realpath(sys.base_prefix)
        if not prefix.startswith("/usr/"):
            binds.append(prefix)
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = "/" + name
            if os.path.islink(host):
                os.symlink(os.readlink(host), ROOT + host)
            elif os.path.isdir(host):
                binds.append(host)
        for host in binds:
            target = ROOT + host
            os.makedirs(target, mode=0o755, exist_ok=True)
            self.mount(host, target, None, MS_BIND | MS_REC)
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            self.mount(None, target, None, flags)
        os.makedirs(ROOT + "/dev", mode=0o755)
        for dev in ("null", "zero", "urandom"):
            open(f"{ROOT}/dev/{dev}", "w").close()
            self.mount(f"/dev/{dev}", f"{ROOT}/dev/{dev}", None, MS_BIND)
        os.makedirs(ROOT + "/tmp", mode=0o755)
        self.mount(None, ROOT, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)

    def drop_capabilities(self) -> None:
        """In a user namespace: keep the uid, lose every capability, for good."""
        ctypes = self.ctypes

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

        self.prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT)
        if self.libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")


def main() -> None:
    """Entry point: run every job of the batch on stdin, one result frame each on stdout."""
    import linecache  # noqa: F401
    import resource  # noqa: F401  (imported here once, for every program)
    import traceback  # noqa: F401  (failing programs print one; importing it costs ~1 ms)

    request = marshal.loads(sys.stdin.buffer.read())
    fences = Fences()
    fences.setup()
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
            record = run_job(fences, job)
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


def run_job(fences: Fences, job: dict) -> dict:
    if fences.mountns:
        return run_in(fences, job, None)  # its /tmp is a fresh tmpfs, gone with the run
    import shutil
    import tempfile

    workdir = tempfile.mkdtemp(prefix="troupe-sandbox-")
    try:
        if fences.root:
            os.chown(workdir, fences.uid, fences.uid)
        return run_in(fences, job, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_in(fences: Fences, job: dict, workdir: str | None) -> dict:
    """Run one job with `workdir` (None: the private /tmp) as its working directory."""
    import select

    cap = job["max_output"]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()  # program -> supervisor
    rp_r, rp_w = os.pipe()  # init -> supervisor; closed in the program before any user code
    pidns = fences.pidns and fences.new_pid_namespace()
    started = time.monotonic()
    init = os.fork()
    if init == 0:
        for fd in (out_r, err_r, st_r, rp_r):
            os.close(fd)
        run_init(fences, job, workdir, pidns, out_w, err_w, st_w, rp_w)  # never returns
    for fd in (out_w, err_w, st_w, rp_w):
        os.close(fd)

    data = {out_r: bytearray(), err_r: bytearray(), st_r: bytearray(), rp_r: bytearray()}
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
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if init_done and (not open_fds & {out_r, err_r} or (grace_until and now >= grace_until)):
            break  # without a pid namespace leftovers may hold the pipes: stop after a grace
        wait = deadline - now
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
    seconds = time.monotonic() - started
    if timed_out or overflow:
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
    for fd in (st_r, rp_r):
        data[fd].extend(drain(fd))
    if not pidns:
        sweep(fences, data[rp_r])
        reap_orphans()
    for fd in (out_r, err_r, st_r, rp_r) + ((pidfd,) if pidfd is not None else ()):
        os.close(fd)
    return classify(
        job,
        data[rp_r],
        data[st_r],
        bytes(data[out_r]),
        bytes(data[err_r]),
        seconds,
        timed_out,
        overflow,
    )


def classify(
    job: dict,
    report: bytes,
    status: bytes,
    stdout: bytes,
    stderr: bytes,
    seconds: float,
    timed_out: bool,
    overflow: bool,
) -> dict:
    lines = report.decode("utf-8", "replace").splitlines()
    notes = set(status.decode("utf-8", "replace").split())
    errors = [line[6:] for line in lines if line.startswith("error ")]
    ends = [line.split() for line in lines if line.startswith(("exit ", "signal "))]
    if errors:
        return result("crash", None, stdout, stderr + errors[0].encode(), seconds)
    if timed_out:
        return result("timeout", None, stdout, stderr, seconds)
    if overflow:
        note = f"\n[sandbox: output over {job['max_output']} bytes; run stopped]".encode()
        return result("crash", None, stdout, stderr + note, seconds, truncated=True)
    if not ends:
        return result("crash", None, stdout, stderr + b"[sandbox: no exit report]", seconds)
    kind, value = ends[-1][0], int(ends[-1][1])
    memory = "memory" in notes or stderr.rstrip().endswith(b"MemoryError")
    if kind == "signal":
        status_ = "timeout" if value == signal.SIGXCPU else ("memory" if memory else "crash")
        return result(status_, -value, stdout, stderr, seconds)
    if value != 0:
        return result("memory" if memory else "failed", value, stdout, stderr, seconds)
    if job["require_completion"] and "completed" not in notes:
        note = b"[sandbox: the program exited before the tests finished]"
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
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        reaped += reap_orphans()
        if not processes_of(fences.uid) or time.monotonic() > deadline:
            return reaped
        time.sleep(0.005)


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is `uid` (zombies included)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
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


def send(fd: int, line: str) -> None:
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass


def run_init(
    fences: Fences, job: dict, workdir, pidns: bool, out_w: int, err_w: int, st_w: int, rp_w: int
) -> None:
    """pid 1 of the program's namespace: private /tmp, fork the program, reap, report."""
    try:
        fences.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a killed supervisor takes us along
        if fences.mountns:
            if not fences.unshare(CLONE_NEWNS):
                raise OSError(fences.ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
            owner = fences.uid  # unprivileged, our own uid: mapped to itself in the namespace
            disk = int(job["disk_mb"])
            fences.mount(
                "tmpfs",
                ROOT + "/tmp",
                "tmpfs",
                MS_NOSUID | MS_NODEV,
                f"size={disk}m,nr_inodes=4096,mode=0700,uid={owner},gid={owner}",
            )
        program = os.fork()
        if program == 0:
            os.close(rp_w)
            run_program(fences, job, workdir, out_w, err_w, st_w)  # never returns
        send(rp_w, f"program {program}")
        for fd in (out_w, err_w, st_w):
            os.close(fd)
        while True:  # as pid 1 we also reap orphans, until the program itself ends
            pid, wait_status = os.wait()
            if pid == program:
                break
        if os.WIFSIGNALED(wait_status):
            send(rp_w, f"signal {os.WTERMSIG(wait_status)}")
        else:
            send(rp_w, f"exit {os.waitstatus_to_exitcode(wait_status)}")
    except BaseException as exc:
        send(rp_w, f"error sandbox init failed: {exc!r}")
    finally:
        os._exit(0)


def run_program(fences: Fences, job: dict, workdir, out_w: int, err_w: int, st_w: int) -> None:
    """The unprivileged process that runs the code; ends with os._exit."""
    import resource  # preloaded by main(): no file lookups after the fork

    code = job["code"]
    try:
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(st_w, STATUS_FD)
        os.closerange(STATUS_FD + 1, 1 << 20)
        if not fences.root:
            os.setpgid(0, 0)  # its own group, so that `sweep` can kill it without killing us
        if fences.mountns:
            os.chroot(ROOT)
            os.chdir("/tmp")
        else:
            os.chdir(workdir)
        cpu = job["cpu_seconds"] or job["timeout"] + 1
        cpu = max(1, int(-(-cpu // 1)))
        memory = int(job["memory_mb"]) << 20
        disk = int(job["disk_mb"]) << 20
        for limit, value in (
            (resource.RLIMIT_CPU, (cpu, cpu + 1)),
            (resource.RLIMIT_AS, (memory, memory)),
            (resource.RLIMIT_FSIZE, (disk, disk)),
            (resource.RLIMIT_NOFILE, (64, 64)),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            resource.setrlimit(limit, value)
        if fences.root or fences.userns:
            nproc = int(job["max_processes"])
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        path = [p for p in sys.path if p.startswith(sys.base_prefix)]
        if fences.root and not fences.mountns:
            path = reachable_path(path)
        if fences.root:
            os.setgroups([])
            os.setgid(fences.uid)
            os.setuid(fences.uid)
        elif fences.userns:
            fences.drop_capabilities()
        fences.prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.environ.clear()
        os.environ.update(ENV)
        if workdir:
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        sys.path[:] = path
        sys.argv[:] = ["program"]
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        if job["python_guard"]:
            install_guard()
        del job, fences
    except BaseException as exc:
        os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(70)

    import builtins
    import linecache

    builtins.exit = builtins.quit = sys.exit  # `-S` skips site, which defines them
    linecache.cache["<program>"] = (len(code), None, code.splitlines(True), "<program>")
    exit_code = 0
    try:
        exec(compile(code, "<program>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
        send(STATUS_FD, "completed")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            exit_code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            exit_code = 1
    except MemoryError:
        send(STATUS_FD, "memory")
        os.write(2, b"MemoryError\n")
        exit_code = 1
    except BaseException as exc:
        try:
            import traceback

            # Start at the program's own frames: ours are invisible inside the chroot anyway.
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        except MemoryError:
            os.write(2, b"MemoryError\n")
        except BaseException:
            os.write(2, b"the program raised an exception (traceback unavailable)\n")
        exit_code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(exit_code & 0xFF)


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
