"""What the checker process costs per scored program: test jobs as they run now (the program
and a separate checker talking over pipes) against the single-process way they ran before
(program and tests as one script, "passed" taken from the program's own status message,
which a program could forge). Both run under the same sandbox layers in one invocation.

    .venv/bin/python bench/sandbox_overhead.py            # 256 programs x 7 repeats
    .venv/bin/python bench/sandbox_overhead.py --smoke    # a tiny run, for CI
    .venv/bin/python bench/sandbox_overhead.py --bwrap    # also: bubblewrap per program

It also times the second opinion on rewards (trainer/tasks/second_opinion.py): what
re-checking a rollout's sample of passing answers adds to a step; and the generated harnesses
of loaded datasets (trainer/tasks/harness.py: call and stdio problems, 8 cases each, scored
through `CodeTask.score_many`), whose comparisons run inside the checker.

`--bwrap` (where `bwrap` is installed) times the design docs/sandbox.md weighs: one bubblewrap
sandbox and a fresh interpreter per program (user, pid, net, ipc and mount namespaces, a
read-only /usr, a tmpfs /tmp, our seccomp filter), against the fork from a warm supervisor,
both one program at a time. It runs each problem's program and tests as one script: a lower
bound for bubblewrap, which would still need the checker as a second process.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sandbox  # noqa: E402
from trainer.tasks.code import synthetic_code  # noqa: E402


def workloads(n: int) -> tuple[list[sandbox.Job], list[sandbox.Job]]:
    task = synthetic_code(seed=0, train_size=n)
    problems = task.problems("train")[:n]
    checked = [sandbox.tests_job(p.answer, p.tests, p.entry_point) for p in problems]
    # The previous design: one script, program then tests, "completed" from the program.
    inline = [
        sandbox.Job(p.answer + "\n" + "\n".join(p.tests) + "\n", require_completion=True)
        for p in problems
    ]
    return checked, inline


def timed(jobs: list[sandbox.Job], workers: int) -> float:
    started = time.perf_counter()
    results = sandbox.run_many(jobs, workers=workers)
    seconds = time.perf_counter() - started
    bad = [r for r in results if not r.passed]
    if bad:
        raise SystemExit(f"{len(bad)} reference programs did not pass: {bad[0].stderr[-300:]}")
    return seconds


def second_opinion_ms(repeats: int, sample: int = 4) -> float:
    """Median ms to re-check `sample` passing answers (the default `second_opinion_sample`),
    5 test cases each."""
    task = synthetic_code(seed=0, train_size=sample)
    problems = task.problems("train")[:sample]
    answers = [f"```python\n{p.answer}\n```" for p in problems]
    values = []
    for _ in range(repeats):
        started = time.perf_counter()
        verdicts = task.second_opinion(problems, answers)
        values.append(time.perf_counter() - started)
        if verdicts != [True] * sample:
            raise SystemExit(f"the second opinion failed reference programs: {verdicts}")
    return statistics.median(values) * 1000


def harness_ms(repeats: int, n: int = 32, workers: int = 2) -> float:
    """Median ms per program for `n` call and `n` stdio problems (8 cases each, floats and
    integers) scored through CodeTask.score_many, right answers, a fresh cache each time."""
    from trainer.tasks.base import Problem
    from trainer.tasks.code import CodeTask
    from trainer.tasks.harness import call_tests, stdio_tests

    problems, answers = [], []
    for i in range(n):
        cases = [([x, i], [x * i, x / (i + 1)]) for x in range(8)]
        tests = call_tests("f", cases)
        problems.append(Problem(f"call-{i}", "", "", "", tests=tests, meta={"io": "call"}))
        answers.append("```python\ndef f(x, i):\n    return [x * i, x / (i + 1)]\n```")
        cases = [(f"{x} {i}\n", f"{x * i}\n{x / (i + 1)}\n") for x in range(8)]
        tests = stdio_tests(cases)
        problems.append(Problem(f"stdio-{i}", "", "", "", tests=tests, meta={"io": "stdio"}))
        program = "x, i = map(int, input().split())\nprint(x * i)\nprint(x / (i + 1))"
        answers.append(f"```python\n{program}\n```")
    values = []
    for _ in range(repeats):
        task = CodeTask("bench", {"train": [], "test": problems}, workers=workers)
        started = time.perf_counter()
        scores = task.score_many(problems, answers)
        values.append(time.perf_counter() - started)
        if scores != [1.0] * len(problems):
            raise SystemExit(f"harness problems failed: {scores}")
    return statistics.median(values) / len(problems) * 1000


def bwrap_command(code: str, seccomp_fd: int) -> list[str]:
    prefix = os.path.realpath(sys.base_prefix)
    python = os.path.join(prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    command = ["bwrap", "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net"]
    command += ["--unshare-uts", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        host = "/" + name
        if os.path.islink(host):
            command += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            command += ["--ro-bind", host, host]
    if not prefix.startswith("/usr/"):
        command += ["--ro-bind", prefix, prefix]
    command += ["--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--die-with-parent"]
    command += ["--new-session", "--cap-drop", "ALL", "--clearenv", "--setenv", "PATH", "/usr/bin"]
    command += ["--seccomp", str(seccomp_fd), python, "-I", "-S", "-c", code]
    return command


def bwrap_per_program(jobs: list[sandbox.Job]) -> float:
    """Seconds for `jobs` run one by one, each in its own bubblewrap sandbox."""
    import struct
    import subprocess
    import tempfile

    from sandbox.seccomp import seccomp_filter

    program = seccomp_filter(platform.machine())
    blob = b"".join(struct.pack("HBBI", *line) for line in program)
    started = time.perf_counter()
    for job in jobs:
        with tempfile.TemporaryFile() as bpf:  # bwrap reads the filter from a descriptor
            bpf.write(blob)
            bpf.seek(0)
            done = subprocess.run(
                bwrap_command(job.code, bpf.fileno()), pass_fds=(bpf.fileno(),), capture_output=True
            )
        if done.returncode != 0:
            raise SystemExit(f"bwrap failed: {done.stderr.decode()[-300:]}")
    return time.perf_counter() - started


def compare_bwrap(inline: list[sandbox.Job], checked: list[sandbox.Job], repeats: int) -> None:
    times: dict[str, list[float]] = {
        "bubblewrap + interpreter per program (program and tests in one)": [],
        "Troupe supervisor, program and tests in one": [],
        "Troupe supervisor, checker and program": [],
    }
    for _ in range(repeats):
        times["bubblewrap + interpreter per program (program and tests in one)"].append(
            bwrap_per_program(inline)
        )
        for name, jobs in (
            ("Troupe supervisor, program and tests in one", inline),
            ("Troupe supervisor, checker and program", checked),
        ):
            times[name].append(timed(jobs, 1))
    print(f"| one at a time ({len(inline)} programs) | median ms per program |")
    print("|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values) / len(inline) * 1000:.2f} |")


def layer_costs(repeats: int) -> dict[str, float]:
    """Median ms of what the new layers add per job: a memory cgroup made, joined and removed
    (where this process may), and a seccomp filter installed in a forked child."""
    from sandbox import cgroups
    from sandbox import fences as fence

    fences = fence.Fences()
    fences.seccomp = fences._probe_seccomp()  # as the supervisor does: the filter built once
    costs: dict[str, list[float]] = {"fork + exit (reference)": [], "seccomp filter": []}
    for name, install in (("fork + exit (reference)", False), ("seccomp filter", True)):
        for _ in range(repeats):
            started = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                if install:
                    fences.prctl(fence.PR_SET_NO_NEW_PRIVS, 1)
                    fences.install_seccomp()
                os._exit(0)
            os.waitpid(pid, 0)
            costs[name].append(time.perf_counter() - started)
    fences.cgroup = cgroups.find_memory_cgroup() if os.geteuid() == 0 else None
    if fences.cgroup is not None:
        costs["memory cgroup"] = []
        for i in range(repeats):
            started = time.perf_counter()
            path = cgroups.make_job_cgroup(fences.cgroup, i, 512)
            cgroups.remove_cgroup(path)
            costs["memory cgroup"].append(time.perf_counter() - started)
    return {name: statistics.median(values) * 1000 for name, values in costs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="8 programs, 1 repeat")
    parser.add_argument("--bwrap", action="store_true", help="also time bubblewrap per program")
    args = parser.parse_args()
    if args.smoke:
        args.programs, args.repeats = 8, 1
    checked, inline = workloads(args.programs)
    layers = sandbox.available_layers()
    times: dict[str, list[float]] = {"checker": [], "single process": []}
    timed(checked[:4], args.workers)  # warm the page cache
    for _ in range(args.repeats):  # interleaved, so drift hits both alike
        times["checker"].append(timed(checked, args.workers))
        times["single process"].append(timed(inline, args.workers))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"sandbox layers: {', '.join(layers)}")
    print(f"{args.programs} programs, run_many(workers={args.workers}), {args.repeats} repeats")
    print("| design | median ms per program | median s per batch |")
    print("|---|---|---|")
    medians = {}
    for name, values in times.items():
        medians[name] = statistics.median(values)
        per = medians[name] / args.programs * 1000
        print(f"| {name} | {per:.2f} | {medians[name]:.3f} |")
    print(f"ratio checker / single process: {medians['checker'] / medians['single process']:.2f}")
    print("| layer | median ms per job |")
    print("|---|---|")
    for name, ms in layer_costs(10 if args.smoke else 200).items():
        print(f"| {name} | {ms:.3f} |")
    ms = second_opinion_ms(args.repeats)
    print(f"second opinion on 4 passing answers (20 test cases): {ms:.1f} ms a step")
    ms = harness_ms(args.repeats, 4 if args.smoke else 32, args.workers)
    print(f"call and stdio harness problems (8 cases each): {ms:.2f} ms per program")
    if args.bwrap:
        compare_bwrap(inline, checked, args.repeats)


if __name__ == "__main__":
    main()
