"""The seccomp filter every program (and checker) gets: a classic-BPF deny list built per
architecture, installed by `Fences.install_seccomp` after PR_SET_NO_NEW_PRIVS.
"""

from __future__ import annotations

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
            "memfd_secret": 447,
            "timer_create": 222,
            "timerfd_create": 283,
            "inotify_init": 253,
            "inotify_init1": 294,
            "fanotify_init": 300,
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
            "memfd_secret": 447,
            "timer_create": 107,
            "timerfd_create": 85,
            "inotify_init1": 26,
            "fanotify_init": 262,
            "clone": 220,
            "clone3": 435,
        },
    ),
}
# Refused with EPERM. Kernel objects that no limit of ours bounds without a memory cgroup:
# memfd, System V shared memory, message queues and semaphores (615 semaphore sets held
# 1.2 GB of kernel memory under memory_mb=256 in an attack), POSIX message queues and keys
# (quotas per uid, shared with the host's user where there is no `uid` layer); and kernel
# interfaces no scored program needs that are common exploit paths (io_uring, userfaultfd,
# perf events, bpf). Also refused: kernel objects that are bounded per uid or per host at
# best, never per job: secret memory (memfd_secret; the mlock limit only), POSIX timers and
# timerfds (~96k a job), inotify and fanotify instances (their watches and marks count
# against the host user's quota where there is no `uid` layer). No scored program needs
# them. Then fork and vfork (see `seccomp_filter`).
DENIED_SYSCALLS = (
    "memfd_create memfd_secret shmget msgget semget mq_open add_key request_key keyctl "
    "io_uring_setup userfaultfd perf_event_open bpf timer_create timerfd_create inotify_init "
    "inotify_init1 fanotify_init fork vfork"
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
