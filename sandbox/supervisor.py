"""The process side of `trainer.tasks.sandbox`: the supervisor that fences in and runs programs.

The host starts this module as `python -I -S -c "...; _supervisor.main()"` with a scrubbed
environment; it reads a marshalled batch of jobs on stdin and writes one marshalled record per
job on stdout. The batch holds limits and offsets only: each job's code and tests stay in a
host file that this process never reads (see `main`). What it protects against, and what
not, is documented in `sandbox.py`.

It imports only cheap standard-library modules (no json, re, dataclasses, selectors): its
start-up is paid once per batch, and every program is forked from it.

Process tree of one job (full mode, running as root with CAP_SYS_ADMIN):

    supervisor ── init (pid 1 of a fresh pid namespace; own mount and IPC namespaces,
                   │    private /tmp, own memory cgroup)
                   ├── checker (test jobs only: runs the tests, calls the program; see
                   │            _checker.py; its verdict goes on a pipe only it holds)
                   └── program (uid UID_BASE + supervisor pid, rlimits, chroot, seccomp)
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
import time

if __package__:  # imported by trainer.tasks.sandbox, for its constants and frame reader
    from trainer.tasks import _checker
else:  # the supervisor process: its directory is on sys.path only while it is imported
    import _checker

UID_BASE = 2_000_000_000  # + supervisor pid (< 2**22): a uid no real account uses
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECUREBITS = 1, 4, 28
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
IPC_RMID = 0
SECBITS_LOCKED_NOROOT = 0x2F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and their locks
ROOT = "/tmp"  # where the skeleton root is mounted, inside the supervisor's mount namespace
STATUS_FD = 3  # the program's status pipe: "completed" (the code ran to its end), "memory"
REPORT_FD = 6  # the checker's own output, framed, straight to the host (never through us)
CALL_IN_FD, CALL_OUT_FD = 4, 5  # candidate: requests from the checker in, answers out
MAX_FRAME = 64 << 20  # largest message the checker accepts from the candidate
CGROUP_PREFIX = "troupe-sandbox-"
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
        # Read now: after unshare(CLONE_NEWUSER) and before the maps are written, the kernel
        # reports the overflow ids (65534) instead of ours.
        self.host_ids = (os.geteuid(), os.getegid())
        # The host's file of code and tests, and its pipe for checker output (see `main`).
        self.sources_fd = self.report_fd = -1
        self.userns = self.netns = self.mountns = self.pidns = False
        self.outer_pidns = False  # unprivileged: the pid namespace `main` must fork into
        self.pid_reset_fd: int | None = None
        self.cgroup: tuple[str, str] | None = None  # ("v1" or "v2", parent directory)
        self.ipc_per_job = False  # each job's init enters a fresh IPC namespace
        self.seccomp = False  # programs get the seccomp filter (see `seccomp_filter`)
        self._seccomp_program: tuple | None = None
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
        self.seccomp = self._probe_seccomp()  # before: our first child may be a pid ns's init
        others = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        if self.root:
            if self.unshare(CLONE_NEWNS | others):
                self.netns = self.ipc_per_job = True
                self.mountns = self._try_build_root()
                self.pidns = self._enable_pidns()
            elif self.unshare(CLONE_NEWNET):
                self.netns = True
        else:
            # Unprivileged: a user namespace (where the kernel allows one) buys the same
            # namespaces; the program keeps our uid but loses every capability.
            for flags in (CLONE_NEWNS | CLONE_NEWPID | others, CLONE_NEWNS | others, others):
                if self.unshare(CLONE_NEWUSER | flags):
                    self.userns = self.netns = self.ipc_per_job = True
                    mapped = self._map_ids()
                    self.mountns = bool(flags & CLONE_NEWNS) and mapped and self._try_build_root()
                    # Our pid namespace starts with our first child: `main` forks into it.
                    self.outer_pidns = bool(flags & CLONE_NEWPID)
                    break
        # ipc_per_job: whoever could unshare IPC once can do it again in each job's init.
        if self.root:
            self.cgroup = find_memory_cgroup()
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
                ("ipc", self.ipc_per_job),
                ("mount", self.mountns),
                ("memcg", self.cgroup is not None),
                ("seccomp", self.seccomp),
                ("userns", self.userns),
            )
            if on
        ]

    def _probe_seccomp(self) -> bool:
        """Whether the kernel takes our filter: installed once in a throwaway child."""
        self._seccomp_program = self._build_seccomp()
        pid = os.fork()
        if pid == 0:
            self.prctl(PR_SET_NO_NEW_PRIVS, 1)
            os._exit(0 if self.install_seccomp() else 1)
        return os.waitpid(pid, 0)[1] == 0

    def _map_ids(self) -> bool:
        uid, gid = self.host_ids  # ourselves, unchanged, inside the namespace
        try:
            for path, text in (
                ("/proc/self/setgroups", "deny"),
                ("/proc/self/uid_map", f"{uid} {uid} 1"),
                ("/proc/self/gid_map", f"{gid} {gid} 1"),
            ):
                with open(path, "w") as fh:
                    fh.write(text)
            return True
        except OSError as exc:
            # Unmapped, no private root can be built: say so; `mount` is then not claimed.
            sys.stderr.write(f"sandbox: could not map our ids in the user namespace ({exc})\n")
            return False

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

    def install_seccomp(self) -> bool:
        """The seccomp filter (see `seccomp_filter`). Needs PR_SET_NO_NEW_PRIVS first; False
        where the architecture or the kernel does not support it."""
        if self._seccomp_program is None:
            self._seccomp_program = self._build_seccomp()
        if not self._seccomp_program:
            return False
        fprog = self._seccomp_program[0]
        return self.libc.prctl(22, 2, self.ctypes.byref(fprog), 0, 0) == 0  # MODE_FILTER

    def _build_seccomp(self) -> tuple:
        """The filter as ctypes structures, built once in the supervisor so that each forked
        process only makes the prctl call. () where the architecture is not supported."""
        program = seccomp_filter(os.uname().machine)
        if program is None:
            return ()
        ctypes = self.ctypes

        class Filter(ctypes.Structure):
            _fields_ = [
                ("code", ctypes.c_uint16),
                ("jt", ctypes.c_uint8),
                ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32),
            ]

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

        filters = (Filter * len(program))(*[Filter(*f) for f in program])
        return (Program(len(program), filters), filters)  # the array must outlive the struct

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


# Per architecture: (AUDIT_ARCH_*, syscall numbers). aarch64 has no fork or vfork call.
SECCOMP_ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "memfd_create": 319,
            "shmget": 29,
            "msgget": 68,
            "semget": 64,
            "mq_open": 240,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "io_uring_setup": 425,
            "userfaultfd": 323,
            "perf_event_open": 298,
            "bpf": 321,
            "fork": 57,
            "vfork": 58,
            "clone": 56,
            "clone3": 435,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "memfd_create": 279,
            "shmget": 194,
            "msgget": 186,
            "semget": 190,
            "mq_open": 180,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "io_uring_setup": 425,
            "userfaultfd": 282,
            "perf_event_open": 241,
            "bpf": 280,
            "clone": 220,
            "clone3": 435,
        },
    ),
}
# Refused with EPERM. Kernel objects that no limit of ours bounds without a memory cgroup:
# memfd, System V shared memory, message queues and semaphores (615 semaphore sets held
# 1.2 GB of kernel memory under memory_mb=256, issue 29), POSIX message queues and keys
# (quotas per uid, shared with the host's user where there is no `uid` layer); and kernel
# interfaces no scored program needs that are common exploit paths (io_uring, userfaultfd,
# perf events, bpf). Then fork and vfork (see `seccomp_filter`).
DENIED_SYSCALLS = (
    "memfd_create shmget msgget semget mq_open add_key request_key keyctl io_uring_setup "
    "userfaultfd perf_event_open bpf fork vfork"
).split()
CLONE_THREAD = 0x00010000
RET_ALLOW, RET_EPERM, RET_ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38


def seccomp_filter(machine: str) -> list[tuple[int, int, int, int]] | None:
    """A classic-BPF seccomp program that bounds what a program can hold outside RLIMIT_AS:

    - DENIED_SYSCALLS: EPERM (memfd and System V objects: RAM that no mount's size bounds;
      /tmp is bounded);
    - fork, vfork, and clone without CLONE_THREAD: EPERM; clone3: ENOSYS, so that libc falls
      back to clone. Threads share one address space (one RLIMIT_AS); new processes would
      each get their own;
    - any other ABI (i386 or x32 calls on x86_64): EPERM, so numbers cannot be dodged.
    """
    if machine not in SECCOMP_ARCHES:
        return None
    audit_arch, numbers = SECCOMP_ARCHES[machine]
    deny = [numbers[n] for n in DENIED_SYSCALLS if n in numbers]
    # Symbolic program: ("ld", offset) | ("jeq"/"jset", k, label_true, label_false) |
    # ("ret", value) | label strings; jumps are resolved to offsets below.
    code: list = [("ld", 4), ("jeq", audit_arch, None, "deny"), ("ld", 0)]
    if machine == "x86_64":
        code.append(("jset", 0x40000000, "deny", None))  # the x32 ABI's bit
    code += [("jeq", n, "deny", None) for n in deny]
    code += [
        ("jeq", numbers["clone3"], "nosys", None),
        ("jeq", numbers["clone"], None, "allow"),
        ("ld", 16),  # the low word of args[0]: clone's flags
        ("jset", CLONE_THREAD, "allow", "deny"),
        "allow",
        ("ret", RET_ALLOW),
        "deny",
        ("ret", RET_EPERM),
        "nosys",
        ("ret", RET_ENOSYS),
    ]
    labels, at = {}, 0
    for item in code:
        if isinstance(item, str):
            labels[item] = at
        else:
            at += 1
    program, at = [], 0
    for item in code:
        if isinstance(item, str):
            continue
        if item[0] == "ld":
            program.append((0x20, 0, 0, item[1]))  # BPF_LD | BPF_W | BPF_ABS
        elif item[0] == "ret":
            program.append((0x06, 0, 0, item[1]))  # BPF_RET | BPF_K
        else:
            op, k, yes, no = item
            jt = 0 if yes is None else labels[yes] - at - 1
            jf = 0 if no is None else labels[no] - at - 1
            program.append((0x15 if op == "jeq" else 0x45, jt, jf, k))  # BPF_JMP|JEQ/JSET|K
        at += 1
    return program


def find_memory_cgroup() -> tuple[str, str] | None:
    """A directory where we may create one memory cgroup per job, or None.

    cgroup v1: a child of our own memory cgroup. cgroup v2: a sibling of our own cgroup (a
    cgroup with processes may not hand controllers to children), which needs the memory
    controller enabled in the parent. Probed by creating and removing a directory.
    """
    try:
        with open("/proc/self/cgroup") as fh:
            entries = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    candidates = []
    for _, controllers, path in entries:
        if "memory" in controllers.split(","):
            candidates.append(("v1", "/sys/fs/cgroup/memory" + path.rstrip("/")))
    for _, controllers, path in entries:
        if controllers == "" and path != "/":
            candidates.append(("v2", os.path.dirname("/sys/fs/cgroup" + path.rstrip("/"))))
    for kind, parent in candidates:
        remove_stale_cgroups(parent)
        limit = "memory.limit_in_bytes" if kind == "v1" else "memory.max"
        probe = f"{parent}/{CGROUP_PREFIX}probe-{os.getpid()}"
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            ok = os.path.exists(f"{probe}/{limit}") and os.access(f"{probe}/cgroup.procs", os.W_OK)
        finally:
            try:
                os.rmdir(probe)
            except OSError:
                pass
        if ok:
            return kind, parent
    return None


def remove_stale_cgroups(parent: str) -> None:
    """Job cgroups of supervisors that were killed before they could remove them (empty by
    now: their processes died with their init)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(CGROUP_PREFIX):
            continue
        owner = name[len(CGROUP_PREFIX) :].split("-")[0]  # "<supervisor pid>-<job index>"
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(f"{parent}/{name}")
            except OSError:
                pass


def write_file(path: str, text: str) -> bool:
    try:
        with open(path, "w") as fh:
            fh.write(text)
        return True
    except OSError:
        return False


def make_job_cgroup(fences: Fences, index: int, memory_mb: int) -> str | None:
    """A memory cgroup capping RAM of everything the job's processes hold: heap, memfd,
    System V and POSIX shared memory, and the files of its tmpfs /tmp. No swap."""
    if fences.cgroup is None:
        return None
    kind, parent = fences.cgroup
    path = f"{parent}/{CGROUP_PREFIX}{os.getpid()}-{index}"
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError:
        return None
    limit = str(int(memory_mb) << 20)
    if kind == "v1":
        ok = write_file(f"{path}/memory.limit_in_bytes", limit)
        write_file(f"{path}/memory.memsw.limit_in_bytes", limit)  # where swap is accounted
        write_file(f"{path}/memory.swappiness", "0")
    else:
        ok = write_file(f"{path}/memory.max", limit)
        write_file(f"{path}/memory.swap.max", "0")
        write_file(f"{path}/memory.oom.group", "1")
    if not ok:
        remove_cgroup(path)
        return None
    return path


def cgroup_ooms(path: str | None) -> int:
    """How often the kernel's OOM killer struck in the job's cgroup."""
    if path is None:
        return 0
    for name in ("memory.oom_control", "memory.events"):
        try:
            with open(f"{path}/{name}") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def remove_cgroup(path: str | None) -> None:
    if path is None:
        return
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)  # the last process may still be exiting


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
    import select

    cap = job["max_output"]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()  # checker -> supervisor: the verdict; never given to the program
    nt_r, nt_w = os.pipe()  # program -> supervisor: its own notes ("completed", "memory")
    rp_r, rp_w = os.pipe()  # init -> supervisor; closed in the program before any user code
    pidns = fences.pidns and fences.new_pid_namespace()
    cgroup = make_job_cgroup(fences, index, job["memory_mb"])
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
    for fd in (st_r, nt_r, rp_r):
        data[fd].extend(drain(fd))
    if not pidns:
        sweep(fences, data[rp_r])
        reap_orphans()
    ooms = cgroup_ooms(cgroup)
    remove_cgroup(cgroup)  # empty now: its processes are gone, and its tmpfs with them
    for fd in tuple(data) + ((pidfd,) if pidfd is not None else ()):
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
        ),
    )


class Observed:
    """What the supervisor saw of one job: init's report, the checker's verdict, the
    program's own (untrusted) notes, the output, and how it ended."""

    def __init__(self, report, verdict, notes, stdout, stderr, seconds, timed_out, overflow, ooms):
        self.report, self.verdict, self.notes = report, verdict, notes
        self.stdout, self.stderr, self.seconds = stdout, stderr, seconds
        self.timed_out, self.overflow, self.ooms = timed_out, overflow, ooms


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
    for a test job, then answers the checker's calls) or the checker (runs the tests)."""
    import resource  # preloaded by main(): no file lookups after the fork

    try:
        import fcntl  # preloaded by main()

        # 0 stdin, 1 stdout, 2 stderr, 3 status, then (4, 5) the checker channel and, in the
        # checker, 6 its report to the host. Copied above the targets first: a source may
        # sit on another one's target number.
        sources = [os.open("/dev/null", os.O_RDONLY), out_w, err_w, st_w, *(channel or ())]
        if checker:
            sources.append(fences.report_fd)  # becomes REPORT_FD
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in sources]
        for target, fd in enumerate(high):
            os.dup2(fd, target)
        os.closerange(len(high), 1 << 20)
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
            (resource.RLIMIT_FSIZE, (disk, disk)),  # also bounds each memfd and shm file
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
        if checker:
            fences.prctl(PR_SET_DUMPABLE, 0)  # again: a uid change may have reset it
        fences.prctl(PR_SET_NO_NEW_PRIVS, 1)
        if fences.seccomp and not fences.install_seccomp():
            raise OSError("the seccomp filter could not be installed")
        os.environ.clear()
        os.environ.update(ENV)
        if workdir:
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
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
        if job["python_guard"] and not checker:
            install_guard()
        report = job if checker else None
        del job, fences
    except BaseException as exc:
        os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(70)

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
            import traceback

            # Start at the code's own frames: ours are invisible inside the chroot anyway.
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
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
