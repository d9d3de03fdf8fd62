"""A second opinion on code rewards: re-check a passing program without the checker.

The checker (sandbox/checker.py) is where "passed" comes from; a hole in it — one nobody has
found yet — would pay a policy for whatever exploits it, and GRPO learns exactly that. So a
sample of each step's passing programs is checked again in an independent way that shares
nothing with the checker but the kernel's fences: one fresh sandboxed process per test case
runs the program, calls it on the case's arguments (or feeds it the case's input) and prints
the result; the comparison with the expected value happens here, in the trainer, on text
the program printed. The expected value never enters that process, and nothing the program
prints can be more than a wrong answer (it is parsed with `ast.literal_eval`). A program the
checker passed and this check fails is a *verdict disagreement*: reward hacking suspected.

Only tests whose shape says what they check can be re-checked: `assert f(<literals>) ==
<literal>` lines (the synthetic dataset, MBPP-style rows), the generated "call" harness and
the generated "stdio" harness (`trainer.tasks.code`). Any other test (a HumanEval
`check(candidate)` function) makes the problem not re-checkable: `cases` returns None.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

MAX_CASES = 8  # test cases re-run per program: each is one process
MAX_PRINTED = 100_000  # characters of a printed result that are parsed


@dataclass(frozen=True)
class Case:
    """One test case, as plain data: call `entry_point(*args)` and compare with `expected`
    (`rule` "equal" or the call harness's "call"), or run the program on `stdin` ("stdio")."""

    rule: str
    expected: object
    entry_point: str = ""
    args: tuple = ()
    stdin: str = ""


def cases(tests: tuple[str, ...], entry_point: str, io: str) -> list[Case] | None:
    """The problem's test cases in plain data (at most MAX_CASES), or None when a test has a
    shape that this module cannot read."""
    found: list[Case] = []
    for test in tests:
        try:
            tree = ast.parse(test)
        except SyntaxError:
            return None
        read = _harness_cases(tree) if io in ("call", "stdio") else _assert_cases(tree)
        if read is None or not all(_written_back(case.args) for case in read):
            return None
        found.extend(read)
    return found[:MAX_CASES] or None


def _written_back(args: tuple) -> bool:
    """Whether `repr(args)` reads back as the same arguments in the re-run's code (an
    argument like 1e999, whose repr is `inf`, does not: no case, rather than a false alarm)."""
    try:
        return repr(ast.literal_eval(repr(args))) == repr(args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _assert_cases(tree: ast.Module) -> list[Case] | None:
    """`assert name(<literals>) == <literal>` statements, and nothing else."""
    read = []
    for node in tree.body:
        test = node.test if isinstance(node, ast.Assert) else None
        if not (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Call)
            and isinstance(test.left.func, ast.Name)
            and not test.left.keywords
        ):
            return None
        try:
            args = tuple(ast.literal_eval(a) for a in test.left.args)
            expected = ast.literal_eval(test.comparators[0])
        except ValueError:
            return None
        read.append(Case("equal", expected, test.left.func.id, args))
    return read


def _harness_cases(tree: ast.Module) -> list[Case] | None:
    """The cases of a generated call or stdio harness (`_TROUPE_CASES = _json.loads(...)`)."""
    table, target = None, None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["_TROUPE_CASES"]
            and isinstance(node.value, ast.Call)
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            table = json.loads(node.value.args[0].value)
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "_troupe_target"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            target = node.args[0].value
    if not isinstance(table, list):
        return None
    if target is None:  # stdio: (input text, expected output text)
        return [Case("stdio", want, stdin=given) for given, want in table]
    return [Case("call", want, target, tuple(args)) for args, want in table]


def job_code(program: str, case: Case) -> str:
    """The program, then (a call case) the call on the case's literal arguments, its result
    printed last; (stdio) the program run on the case's input."""
    if case.rule == "stdio":
        return (
            "import io as _troupe_io, sys as _troupe_sys\n"
            f"_troupe_sys.stdin = _troupe_io.TextIOWrapper(_troupe_io.BytesIO("
            f"{case.stdin.encode()!r}), encoding='utf-8')\n{program}\n"
        )
    if case.rule == "call":  # as the call harness finds it: a function, or Solution().name
        target = (
            f"({case.entry_point} if callable(globals().get({case.entry_point!r})) "
            f"else getattr(Solution(), {case.entry_point!r}))"
        )
    else:
        target = case.entry_point
    return f"{program}\nprint('\\n' + repr({target}(*{case.args!r})))\n"


def agrees(case: Case, passed: bool, stdout: str) -> bool:
    """Whether the case holds, by what the program printed (`passed`: it exited cleanly)."""
    if not passed:
        return False
    if case.rule == "stdio":
        return same_text(stdout, str(case.expected))
    lines = stdout.rstrip("\n").rsplit("\n", 1)
    printed = lines[-1][:MAX_PRINTED] if lines else ""
    try:
        got = _literal(printed)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return printed == repr(case.expected)  # nan, inf: compare their text
    if case.rule == "call":
        return same_call_result(got, case.expected)
    return got == case.expected  # the assert's own `==`, on plain data


def _literal(text: str):
    """The plain value a repr shows: a literal, or the two reprs that are calls."""
    if text == "set()":
        return set()
    if text.startswith("frozenset(") and text.endswith(")"):
        inner = text[len("frozenset(") : -1]
        return frozenset(ast.literal_eval(inner)) if inner else frozenset()
    return ast.literal_eval(text)


def same_call_result(got, want) -> bool:
    """The call harness's comparison (`_troupe_same` in trainer/tasks/code.py)."""
    if isinstance(got, tuple):
        got = list(got)
    if got == want:
        return True
    if isinstance(want, list) and len(want) == 1 and same_call_result(got, want[0]):
        return True
    if isinstance(got, float) and isinstance(want, (int, float)) and not isinstance(want, bool):
        return abs(got - want) <= 1e-6 * max(1.0, abs(want))
    return False


def same_text(got: str, want: str) -> bool:
    """The stdio harness's comparison (`_STDIO_CHECK` in trainer/tasks/code.py): lines
    without trailing space or blank lines; numbers within 1e-6 relative."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip().splitlines() if line.strip()]

    a, b = lines(got), lines(want)
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
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
