"""The fences a supervisor puts up once per batch: namespaces, the uid and id maps, the
read-only skeleton root, capabilities; and the privileged calls (unshare, mount, prctl,
setns) its processes make through libc. The seccomp filter is `sandbox.seccomp`, the memory
cgroups `sandbox.cgroups`.
"""

from __future__ import annotations

import os
import sys

from sandbox.cgroups import find_memory_cgroup
from sandbox.seccomp import seccomp_filter

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
# Landlock (Linux 5.13+; the same numbers on x86_64 and aarch64): without a private root, a
# program may write only beneath its own working directory (and to /dev/null).
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_WRITE_FILE, LANDLOCK_TRUNCATE = 1 << 1, 1 << 14
# Every right that changes the file system, by the ABI version that added it: write a file,
# remove a directory or file, make a char device, directory, file, socket, fifo, block device
# or symlink (1); link or rename across directories (2); truncate (3).
LANDLOCK_WRITES = {1: 0b1_1111_1111_0010, 2: 1 << 13, 3: LANDLOCK_TRUNCATE}


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
        # Without `mountns`: programs may write only in their own working directory (Landlock)
        self.landlock = False
        self._landlock_writes = 0  # the write rights this kernel's Landlock knows
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
        if not self.mountns:
            self.landlock = self._probe_landlock()
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
                ("landlock", self.landlock),
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

    def _probe_landlock(self) -> bool:
        """Whether the kernel has Landlock; remembers the write rights its version knows."""
        version = self.libc.syscall(
            SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION
        )
        if version < 1:
            return False
        for abi, rights in LANDLOCK_WRITES.items():
            if version >= abi:
                self._landlock_writes |= rights
        return True

    def confine_writes(self, workdir: str | None) -> None:
        """Landlock this process: from now on it (and whatever it starts) may change the file
        system only beneath `workdir` (None: nowhere) and write to /dev/null. Reading is
        left alone. Needs PR_SET_NO_NEW_PRIVS first; OSError when the kernel refuses."""
        ctypes, writes = self.ctypes, self._landlock_writes

        class PathBeneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        handled = ctypes.c_uint64(writes)
        ruleset = self.libc.syscall(
            SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(handled), ctypes.sizeof(handled), 0
        )
        if ruleset < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        try:
            places = [("/dev/null", LANDLOCK_WRITE_FILE | (writes & LANDLOCK_TRUNCATE))]
            if workdir is not None:
                places.append((workdir, writes))
            for path, rights in places:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = PathBeneath(rights, fd)
                    if self.libc.syscall(
                        SYS_LANDLOCK_ADD_RULE,
                        ruleset,
                        LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(rule),
                        0,
                    ):
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule {path} failed")
                finally:
                    os.close(fd)
            if self.libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0):
                raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        finally:
            os.close(ruleset)

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
