"""The host side of the sandbox: the public calls (`run_program`, `run_tests`, `run_many`),
and one supervisor process per batch of jobs, spoken to in plain data (`_run_batch`).
What the sandbox does and does not protect against: `sandbox/__init__.py`.
"""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sandbox.protocol import ENV, read_frames

STATUSES = ("passed", "failed", "timeout", "memory", "crash")
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
    checker_stdout: str = ""  # what the tests printed (test jobs), never the program's output

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
    # The supervisor's modules load as submodules of a bare `sandbox` package made on the
    # spot: their .pyc files are used, and neither this package's __init__ (the host side:
    # subprocess, logging, dataclasses) nor anything else of the repository is loaded
    # there. Nothing goes on sys.path, so no module of ours can shadow the standard
    # library's for the programs forked from it.
    here = os.path.dirname(os.path.abspath(__file__))
    bootstrap = (
        "import sys; package = type(sys)('sandbox'); "
        f"package.__path__ = [{here!r}]; sys.modules['sandbox'] = package; "
        "from sandbox import supervisor; del package; supervisor.main()"
    )
    return [sys.executable, "-I", "-S", "-c", bootstrap]


def _run_batch(jobs: list[Job]) -> list[SandboxResult]:
    """One supervisor process for `jobs`; a backstop deadline kills it if it overruns."""
    sources, placed = _write_sources(jobs)
    report_r, report_w = os.pipe()  # the checkers' output, straight from them to us
    payload = _request(jobs, placed, sources.fileno(), report_w)
    deadline = time.monotonic() + 10.0 + sum(j.timeout + 0.5 for j in jobs)
    cap = 65_536 + sum(2 * j.max_output * 4 + 4096 for j in jobs)  # utf-8 may grow replaced bytes
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            _launch_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(ENV),
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
    out, err, checker_out, killed = _collect(proc, payload, report, deadline, cap)
    return _results(len(jobs), out, err, checker_out, killed, started)


def _write_sources(jobs: list[Job]):
    """The code and tests go in an unlinked file that only each job's init (its own code)
    and checker (its tests) read; the supervisor, which every program is forked from, gets
    only where they lie (a hole found under attack: a program read the tests of its batch from
    the supervisor's memory). Returns the file and, per job, (offset, length) of each text."""
    import tempfile

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
    return sources, placed


def _request(jobs: list[Job], placed: list, sources_fd: int, report_fd: int) -> bytes:
    """The batch in plain data, as the supervisor reads it on stdin: limits and offsets only."""
    return marshal.dumps(
        {
            "sources_fd": sources_fd,
            "report_fd": report_fd,
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


def _collect(proc: subprocess.Popen, payload: bytes, report, deadline: float, cap: int):
    """Send the batch, read the supervisor's stdout and stderr and the checkers' reports
    until all close or the deadline passes (then kill its group); (out, err, checker_out,
    killed)."""
    import selectors

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
    return bytes(out), bytes(err), bytes(checker_out), killed


def _results(
    n_jobs: int, out: bytes, err: bytes, checker_out: bytes, killed: bool, started: float
) -> list[SandboxResult]:
    """One SandboxResult per job from the supervisor's frames, the checkers' output last."""
    frames = read_frames(out)
    header = next((f for f in frames if "isolation" in f), {})
    by_index = {f["i"]: f for f in frames if "i" in f}
    checker_said = {f["i"]: f for f in read_frames(checker_out)}
    isolation = tuple(header.get("isolation", ()))
    problem = err.decode("utf-8", "replace")[-2000:]
    if killed:
        problem = f"the sandbox supervisor overran its deadline and was killed\n{problem}"
    results = []
    for i in range(n_jobs):
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
                checker_stdout=said.get("stdout", ""),
            )
        )
    return results


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
