"""Code tasks: write a Python program; it is run against hidden tests in the sandbox.

`CodeTask` wraps any list of code problems. A problem's tests come in one of three kinds,
named by `meta["io"]`:

- "assert" (default): test code appended to the program — assert lines, or HumanEval's
  `def check(candidate)` followed by `check(entry_point)`;
- "call": a generated check that calls `entry_point` (or `Solution().entry_point`) on
  argument lists and compares the results (DeepCoder/TACO function-call tests);
- "stdio": a generated harness that runs the program once per case with the case's input
  on stdin and compares what it prints (DeepCoder stdin/stdout tests).

A problem may carry `meta["prefix"]` (HumanEval's prompt: imports, helpers, signature); it is
put before the extracted program, which then either continues the prompt's function body or
redefines the whole function.

The built-in synthetic dataset (`synthetic_code`) is the code counterpart of the synthetic
arithmetic: f(x) applies a chain of k operations (`add N`, `sub N`, `times N`, `mod N`,
`neg`, `square`; N in 1..9, mod N >= 2) to an integer. compact: `add 3; times 2 | f(1)=8`;
subproblems: one per operation (compact `add 3`, answer `x=x+3`); answer: the reference
program; tests: asserts on five inputs including 0 and a negative. Splits as for synthetic
math: fixed sizes, lazily generated, disjoint by operation chain (see `StratumSplit`).

Scoring is batched: `score_many` deduplicates (program, tests) pairs, looks them up in a
bounded cache, and runs the rest in parallel sandbox processes (`sandbox.run_many`).
"""

from __future__ import annotations

import functools
import json
import random
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from trainer.tasks.base import SYNTHETIC_SIZES, Problem, Subproblem, Task, synthetic_splits

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
CACHE_SIZE = 100_000  # (program, tests) results kept per task
_VIEW_BLOCK = re.compile(r"```(?:python)?\s*\n(.*?)```", re.DOTALL)

# name -> (natural-language step, statement); N is filled in.
OPERATIONS = {
    "add": ("add {n} to x", "x=x+{n}"),
    "sub": ("subtract {n} from x", "x=x-{n}"),
    "times": ("multiply x by {n}", "x=x*{n}"),
    "mod": ("replace x by x modulo {n} (Python's %, a number from 0 to {m})", "x=x%{n}"),
    "neg": ("negate x", "x=-x"),
    "square": ("square x", "x=x*x"),
}
_OP_NAMES = tuple(OPERATIONS)

if TYPE_CHECKING:
    import sandbox


def extract_program(completion: str | None, entry_point: str = "") -> str | None:
    """The program in a completion: the last ```python (or ```) block — preferring the last
    one that defines `entry_point` — else everything from the first `def ` on; else None."""
    if not completion:
        return None
    blocks = [
        body
        for lang, body in _FENCE.findall(completion)
        if lang.lower() in ("", "python", "py", "python3") and body.strip()
    ]
    if blocks:
        if entry_point:
            defining = [b for b in blocks if _defines(b, entry_point)]
            if defining:
                return defining[-1].strip("\n")
        return blocks[-1].strip("\n")
    start = completion.find("def ")
    if start >= 0:
        return completion[start:].strip("\n")
    return None


class CodeTask(Task):
    """Problems with hidden tests; a completion scores 1.0 when its program passes them all."""

    name = "code"

    def __init__(
        self,
        dataset: str,
        splits: dict[str, list[Problem]],
        seed: int = 0,
        *,
        timeout: float = 6.0,
        memory_mb: int = 512,
        workers: int = 2,
    ):
        super().__init__(dataset, splits, seed)
        self.timeout = timeout  # wall-clock seconds per program (all its test cases)
        self.memory_mb = memory_mb
        self.workers = workers  # sandbox processes running at once
        self._cache: OrderedDict[tuple, float] = OrderedDict()
        self._lock = threading.Lock()

    def extract(self, completion: str) -> str | None:
        return extract_program(completion)

    # --- how workflows and prompts treat programs --------------------------------------------
    max_rounds = 2
    paper_dataset = "deepcoder"
    picks_candidate = True
    answer_rule = "Write the complete Python function in a single ```python code block."
    aggregate_rule = "Reply with the number of the best solution in \\boxed{}, e.g. \\boxed{2}."

    @classmethod
    def candidate_view(cls, completion: str) -> str:
        """The last fenced block, else everything from the first `def `, else the text."""
        blocks = _VIEW_BLOCK.findall(completion)
        if blocks:
            return blocks[-1].strip()
        start = completion.find("def ")
        return completion[start:].strip() if start >= 0 else completion.strip()

    @classmethod
    def from_row(cls, row: dict, problem_id: str, question: str, where: str, source: str):
        tests = row.get("tests")
        if isinstance(tests, str):
            tests = (tests,)
        if not tests or not all(isinstance(t, str) for t in tests):
            raise ValueError(f"{where}: a code row needs 'tests' (a string or strings)")
        meta = {"source": source, "io": row.get("io", "assert")}
        if row.get("prefix"):
            meta["prefix"] = row["prefix"]
        return Problem(
            problem_id,
            question,
            question,
            str(row.get("answer", "")),
            tests=tuple(tests),
            entry_point=str(row.get("entry_point", "")),
            meta=meta,
        )

    @classmethod
    def synthetic(cls, seed: int, **knobs) -> CodeTask:
        for alias, name in (("min_terms", "min_ops"), ("max_terms", "max_ops")):
            if alias in knobs:
                knobs.setdefault(name, knobs.pop(alias))
        return synthetic_code(seed, **knobs)

    def score(self, problem: Problem, completion: str) -> float:
        return self.score_many([problem], [completion])[0]

    def score_many(self, problems: list[Problem], completions: list[str]) -> list[float]:
        # imported here: the web process reads this class's defaults, never runs programs
        import sandbox

        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
        scores: list[float | None] = [None] * len(problems)
        pending: dict[tuple, list[int]] = {}
        for i, (problem, completion) in enumerate(zip(problems, completions)):
            program = self._program(problem, completion)
            if program is None or not problem.tests:
                scores[i] = 0.0
                continue
            key = _key(problem, program)
            with self._lock:
                cached = self._cache.get(key)
                if cached is not None:
                    self._cache.move_to_end(key)
            if cached is not None:
                scores[i] = cached
            else:
                pending.setdefault(key, []).append(i)
        if pending:
            sandbox.require_isolation()  # refuse to score code below the configured minimum
            keys = list(pending)
            jobs = [self._job(*key) for key in keys]
            results = sandbox.run_many(jobs, workers=self.workers)
            with self._lock:
                for key, result in zip(keys, results):
                    value = 1.0 if result.passed else 0.0
                    if result.returncode is not None or result.status != "crash":
                        self._cache[key] = value  # not when the sandbox itself failed
                    for i in pending[key]:
                        scores[i] = value
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return scores  # type: ignore[return-value]

    def second_opinion(self, problems: list[Problem], completions: list[str]) -> list[bool | None]:
        """Each completion re-checked without the checker (trainer/tasks/second_opinion.py):
        True when every re-run test case agrees, False when one does not, None when the
        problem's tests cannot be re-checked that way."""
        import sandbox
        from trainer.tasks import second_opinion

        jobs, owners = [], []
        verdicts: list[bool | None] = [None] * len(problems)
        for i, (problem, completion) in enumerate(zip(problems, completions)):
            program = self._program(problem, completion)
            io = problem.meta.get("io", "assert")
            found = second_opinion.cases(problem.tests, problem.entry_point, io)
            if program is None or found is None:
                continue
            verdicts[i] = True
            for case in found:
                code = second_opinion.job_code(_full_program(problem, program), case)
                jobs.append(sandbox.Job(code, timeout=self.timeout, memory_mb=self.memory_mb))
                owners.append((i, case))
        if jobs:
            sandbox.require_isolation()
            results = sandbox.run_many(jobs, workers=self.workers)
            for (i, case), result in zip(owners, results):
                if not second_opinion.agrees(case, result.passed, result.stdout):
                    verdicts[i] = False
        return verdicts

    def run(self, problem: Problem, completion: str) -> sandbox.SandboxResult | None:
        """The full sandbox result for one completion (for debugging and examples)."""
        import sandbox

        program = self._program(problem, completion)
        if program is None:
            return None
        sandbox.require_isolation()
        return sandbox.run_many([self._job(*_key(problem, program))], workers=1)[0]

    @staticmethod
    def _program(problem: Problem, completion: str) -> str | None:
        if (
            problem.meta.get("prefix")
            and completion
            and completion.strip()
            and "```" not in completion
            and not _defines(completion, problem.entry_point)
        ):
            return completion  # a bare continuation of the prompt's function body
        return extract_program(completion, problem.entry_point)

    def _job(self, program: str, tests: tuple[str, ...], entry_point: str, io: str):
        import sandbox

        limits = {"timeout": self.timeout, "memory_mb": self.memory_mb}
        if io == "stdio":
            runner = f"_TROUPE_PROGRAM = {program!r}\n{_STDIO_RUNNER}"
            return sandbox.tests_job(runner, tests, "", **limits)
        if io == "call":  # the check finds `entry_point` itself (it may be a Solution method)
            return sandbox.tests_job(program, tests, "", **limits)
        return sandbox.tests_job(program, tests, entry_point, **limits)


def _key(problem: Problem, program: str) -> tuple:
    """What a result depends on: the cache key, and the arguments of `CodeTask._job`."""
    io = problem.meta.get("io", "assert")
    return (_full_program(problem, program), problem.tests, problem.entry_point, io)


def _defines(program: str, name: str) -> bool:
    return bool(name) and re.search(rf"\bdef\s+{re.escape(name)}\b", program) is not None


def _full_program(problem: Problem, program: str) -> str:
    prefix = problem.meta.get("prefix", "")
    if not prefix:
        return program
    if _defines(program, problem.entry_point):
        return f"{prefix.rstrip()}\n\n{program}"  # a whole function: it replaces the stub
    return prefix + program  # a body: it continues the prompt's function


# --- test harnesses for loaded datasets ---------------------------------------------------

_CALL_CHECK = """
import json as _json

_TROUPE_CASES = _json.loads({cases!r})


def _troupe_target(name):
    scope = globals()
    if callable(scope.get(name)):
        return scope[name]
    if "Solution" in scope:
        return getattr(scope["Solution"](), name)
    raise NameError(f"the program defines neither {{name}}() nor Solution.{{name}}()")


def _troupe_same(got, want):
    if isinstance(got, tuple):
        got = list(got)
    if got == want:
        return True
    if isinstance(want, list) and len(want) == 1 and _troupe_same(got, want[0]):
        return True  # TACO wraps each expected value in a list
    if isinstance(got, float) and isinstance(want, (int, float)) and not isinstance(want, bool):
        return abs(got - want) <= 1e-6 * max(1.0, abs(want))
    return False


_troupe_f = _troupe_target({name!r})
for _troupe_i, (_troupe_args, _troupe_want) in enumerate(_TROUPE_CASES):
    _troupe_got = _troupe_f(*_troupe_args)
    assert _troupe_same(_troupe_got, _troupe_want), (
        f"case {{_troupe_i}}: expected {{_troupe_want!r}}, got {{_troupe_got!r}}"
    )
"""

# The program's side of a stdio test: runs the program (`_TROUPE_PROGRAM`) on one input and
# returns what it printed. It runs in the program's process; the checker only sees the text.
_STDIO_RUNNER = """
import io as _io
import sys as _sys

_troupe_code = compile(_TROUPE_PROGRAM, "<program>", "exec")


def _troupe_run(stdin_text):
    real = _sys.stdin, _sys.stdout
    out = _io.BytesIO()
    _sys.stdin = _io.TextIOWrapper(_io.BytesIO(stdin_text.encode()), encoding="utf-8")
    _sys.stdout = _io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    try:
        exec(_troupe_code, {"__name__": "__main__"})
    except SystemExit:
        pass
    finally:
        _sys.stdout.flush()
        text = out.getvalue().decode("utf-8", "replace")  # before the wrapper closes `out`
        _sys.stdin, _sys.stdout = real
    return text
"""

_STDIO_CHECK = """
import json as _json

_TROUPE_CASES = _json.loads({cases!r})


def _troupe_lines(text):
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return [line for line in lines if line]


def _troupe_same(got, want):
    a, b = _troupe_lines(got), _troupe_lines(want)
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):  # numbers may differ in formatting: 0.5 vs 0.500000
        xs, ys = x.split(), y.split()
        if len(xs) != len(ys):
            return False
        for u, v in zip(xs, ys):
            if u == v:
                continue
            try:
                if abs(float(u) - float(v)) > 1e-6 * max(1.0, abs(float(v))):
                    return False
            except ValueError:
                return False
    return True


for _troupe_i, (_troupe_in, _troupe_want) in enumerate(_TROUPE_CASES):
    _troupe_got = _troupe_run(_troupe_in)
    assert isinstance(_troupe_got, str), f"case {{_troupe_i}}: no output text"
    assert _troupe_same(_troupe_got, _troupe_want), (
        f"case {{_troupe_i}}: expected {{_troupe_want[:200]!r}}, got {{_troupe_got[:200]!r}}"
    )
"""


def call_tests(entry_point: str, cases: list[tuple[list, object]]) -> tuple[str, ...]:
    """A check program calling `entry_point(*args)` on each (args, expected) case."""
    return (
        _CALL_CHECK.format(cases=json.dumps([[list(a), w] for a, w in cases]), name=entry_point),
    )


def stdio_tests(cases: list[tuple[str, str]]) -> tuple[str, ...]:
    """A harness running the program (`_TROUPE_PROGRAM`) once per (stdin, expected stdout)."""
    return (_STDIO_CHECK.format(cases=json.dumps([[i, o] for i, o in cases])),)


# --- the synthetic dataset ----------------------------------------------------------------


def synthetic_code(
    seed: int = 0,
    *,
    min_ops: int = 1,
    max_ops: int = 3,
    max_operand: int = 9,
    train_size: int = SYNTHETIC_SIZES["train"],
    test_size: int = SYNTHETIC_SIZES["test"],
    **task_options,
) -> CodeTask:
    """The built-in program-synthesis dataset (see the module docstring)."""
    if not 1 <= min_ops <= max_ops:
        raise ValueError(f"need 1 <= min_ops <= max_ops, got {min_ops}..{max_ops}")
    if max_operand < 2:
        raise ValueError(f"max_operand must be at least 2 (mod needs N >= 2), got {max_operand}")
    all_ops = [(name, n) for name in ("add", "sub", "times") for n in range(1, max_operand + 1)]
    all_ops += [("mod", n) for n in range(2, max_operand + 1)] + [("neg", 0), ("square", 0)]
    splits = synthetic_splits(
        "code",
        seed,
        {"train": int(train_size), "test": int(test_size)},
        range(min_ops, max_ops + 1),
        all_ops,
        compact=_chain,
        draw=lambda rng, k: tuple(_draw_op(rng, max_operand) for _ in range(k)),
        build=_code_problem,
    )
    task_options.setdefault("timeout", 2.0)  # the programs are straight-line: 2 s is plenty
    return CodeTask("synthetic", splits, seed, **task_options)


def _draw_op(rng: random.Random, max_operand: int) -> tuple[str, int]:
    name = _OP_NAMES[int(rng.random() * len(_OP_NAMES))]
    if name in ("neg", "square"):
        return (name, 0)
    low = 2 if name == "mod" else 1
    return (name, low + int(rng.random() * (max_operand - low + 1)))


@functools.cache
def _op(name: str, n: int) -> Subproblem:
    step, statement = OPERATIONS[name]
    step = step.format(n=n, m=n - 1)
    return Subproblem(
        compact=name if name in ("neg", "square") else f"{name} {n}",
        question=f"{step[0].upper()}{step[1:]}.",
        answer=statement.format(n=n),
    )


def _chain(ops: tuple[tuple[str, int], ...]) -> str:
    return "; ".join(_op(*op).compact for op in ops)


def apply_ops(ops: tuple[tuple[str, int], ...], x: int) -> int:
    for name, n in ops:
        if name == "add":
            x = x + n
        elif name == "sub":
            x = x - n
        elif name == "times":
            x = x * n
        elif name == "mod":
            x = x % n
        elif name == "neg":
            x = -x
        else:
            x = x * x
    return x


def _distinct(rng: random.Random, low: int, high: int, n: int, exclude: tuple) -> list[int]:
    picked: list[int] = []
    while len(picked) < n:
        v = low + int(rng.random() * (high - low + 1))
        if v not in picked and v not in exclude:
            picked.append(v)
    return picked


def _code_problem(problem_id: str, ops: tuple[tuple[str, int], ...], rng: random.Random) -> Problem:
    subproblems = tuple(_op(*op) for op in ops)
    examples = _distinct(rng, -5, 5, 2, exclude=())
    # Hidden inputs: 0, a negative, and three more distinct values from -9..9.
    negative = -1 - int(rng.random() * 9)
    inputs = [0, negative, *_distinct(rng, -9, 9, 3, exclude=(0, negative))]
    steps = "\n".join(f"{i + 1}. {s.question}" for i, s in enumerate(subproblems))
    shown = " and ".join(f"f({x}) = {apply_ops(ops, x)}" for x in examples)
    question = (
        "Write a Python function f(x) that takes an integer x, applies these steps in order "
        f"and returns the result:\n{steps}\nFor example, {shown}.\n"
        "Write the function as `def f(x):` in a ```python code block."
    )
    x0 = examples[0]
    body = "".join(f"    {s.answer}\n" for s in subproblems)
    return Problem(
        id=problem_id,
        question=question,
        compact=f"{_chain(ops)} | f({x0})={apply_ops(ops, x0)}",
        answer=f"def f(x):\n{body}    return x",
        tests=tuple(f"assert f({x}) == {apply_ops(ops, x)}" for x in inputs),
        entry_point="f",
        subproblems=subproblems,
        meta={"source": "synthetic", "ops": len(ops)},
    )
