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

import ast
import functools
import random
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from trainer.tasks.base import SYNTHETIC_SIZES, Problem, Subproblem, Task, synthetic_splits
from trainer.tasks.harness import call_tests, stdio_program, stdio_tests  # noqa: F401

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
            try:  # its helpers are bound in the checker: a prompt that does not parse is refused
                prompt_helpers(str(row["prefix"]), str(row.get("entry_point", "")))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
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
        """Each completion checked again in another way (trainer/tasks/second_opinion.py):
        True when the re-check agrees that it passes, False when it does not, None when the
        problem's tests cannot be re-checked. The program runs exactly as in the main check
        (the same source text, descriptors, limits and environment); only the checker's
        side differs."""
        import sandbox
        from trainer.tasks import second_opinion

        jobs, owners = [], []
        verdicts: list[bool | None] = [None] * len(problems)
        for i, (problem, completion) in enumerate(zip(problems, completions)):
            program = self._program(problem, completion)
            io = problem.meta.get("io", "assert")
            helpers = prompt_helpers(problem.meta.get("prefix", ""), problem.entry_point)
            plan = second_opinion.plan(problem.tests, problem.entry_point, io, helpers)
            if program is None or plan is None:
                continue
            side = program_side(_full_program(problem, program), io)
            jobs.append(sandbox.tests_job(side, plan.tests, plan.entry_point, **self._limits()))
            owners.append((i, plan))
        if jobs:
            sandbox.require_isolation()
            results = sandbox.run_many(jobs, workers=self.workers)
            for (i, plan), result in zip(owners, results):
                verdicts[i] = second_opinion.agrees(plan, result)
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

    def _limits(self) -> dict:
        return {"timeout": self.timeout, "memory_mb": self.memory_mb}

    def _job(self, program: str, tests: tuple[str, ...], entry_point: str, io: str):
        import sandbox

        side = program_side(program, io)
        # "call": the check finds `entry_point` itself (it may be a Solution method)
        named = "" if io in ("call", "stdio") else entry_point
        return sandbox.tests_job(side, tests, named, **self._limits())


def program_side(program: str, io: str) -> str:
    """What runs in the program's process: the program, or (stdio) the program as text and
    the function that runs it on one input. The same for the main check and the re-check."""
    return stdio_program(program) if io == "stdio" else program


def _key(problem: Problem, program: str) -> tuple:
    """What a result depends on: the cache key, and the arguments of `CodeTask._job`. The
    prompt's own definitions (HumanEval's `poly`, `encode_cyclic`…) come after the tests'
    view of the program's names, so the tests call the prompt's helpers, never the
    program's versions of them."""
    io = problem.meta.get("io", "assert")
    helpers = prompt_helpers(problem.meta.get("prefix", ""), problem.entry_point)
    tests = (helpers, *problem.tests) if helpers else problem.tests
    return (_full_program(problem, program), tests, problem.entry_point, io)


def prompt_helpers(prefix: str, entry_point: str) -> str:
    """The prompt's top-level statements but the entry point's stub (imports, helper
    functions, constants), as source for the checker; "" for none. A prompt that does not
    parse raises ValueError, rather than leave the tests trusting the program's helpers."""
    if not prefix:
        return ""
    tree = None
    for ending in ("", "\n    pass\n"):  # a stub may end at its signature: `def f(x):`
        try:
            tree = ast.parse(prefix + ending)
            break
        except SyntaxError as exc:
            problem = exc
    if tree is None:
        raise ValueError(f"the prompt of {entry_point!r} does not parse: {problem}")
    stub = (ast.FunctionDef, ast.AsyncFunctionDef)
    kept = [
        ast.get_source_segment(prefix, node, padded=True)
        for node in tree.body
        if not (isinstance(node, stub) and node.name == entry_point)
    ]
    kept = [text for text in kept if text]
    return "\n".join(kept) + "\n" if kept else ""


def _defines(program: str, name: str) -> bool:
    return bool(name) and re.search(rf"\bdef\s+{re.escape(name)}\b", program) is not None


def _full_program(problem: Problem, program: str) -> str:
    prefix = problem.meta.get("prefix", "")
    if not prefix:
        return program
    if _defines(program, problem.entry_point):
        return f"{prefix.rstrip()}\n\n{program}"  # a whole function: it replaces the stub
    return prefix + program  # a body: it continues the prompt's function


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
