"""A second opinion on code rewards: check a passing program again, in another way.

The checker (sandbox/checker.py) and the harness comparisons (trainer/tasks/harness.py) are
where "passed" comes from; a hole in them — one nobody has found yet — would pay a policy for
whatever exploits it, and GRPO learns exactly that. So a sample of each step's passing
answers is checked again by a re-check that shares as little with the first as it can:

- Its own comparison, here, in the trainer, written independently of the harness and
  stricter: exact types (an int is not a float, True is not 1; only a JSON list may come back
  as a tuple, JSON having no tuples), exact rational arithmetic (`fractions.Fraction`) for
  the float tolerance, and no tolerance at all unless the problem states one (a generated
  harness states its own; an `assert f(2) == 0.5` line states none).
- The checker's side only fetches values: it calls the program on each case's arguments (or
  runs it on each case's input) exactly as the main check does and prints the results,
  marshalled, on its own output, which the program never holds. The expected values never
  enter the job.
- HumanEval's `check(candidate)` tests run again with the prompt's helpers and nothing of the
  program's but its entry point.
- The program cannot tell it is being re-checked: it is the same source text, run as a test
  job with the same descriptors, limits and environment, answering the same calls in the
  same order.

A program the main check passed and this check fails is a *verdict disagreement*: reward
hacking suspected. Tests of another shape (a test that is neither literal asserts, a
generated harness nor a `check` function) cannot be re-checked: `plan` returns None.
"""

from __future__ import annotations

import ast
import json
import marshal
import math
import re
from dataclasses import dataclass
from fractions import Fraction

MAX_DEPTH = 100  # nesting of a compared value, as the sandbox's plain data
MAX_EXPECTED = 16_000  # bytes of marshalled expected values a re-check may compare
MAX_NUMBER_CHARS = 4000  # longer printed numbers compare as text (an exact rational's limit)
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", re.ASCII)


@dataclass(frozen=True)
class Plan:
    """How one problem is re-checked: the tests the checker runs (`entry_point` for the
    sandbox's existence check, "" for none), the rule its results are compared by ("equal":
    literal asserts; "call", "stdio": a generated harness; "check": the job's own verdict),
    the expected values and the tolerance the problem states."""

    tests: str
    entry_point: str
    rule: str
    expected: tuple = ()
    tolerance: float = 0.0


def plan(tests: tuple[str, ...], entry_point: str, io: str, helpers: str = "") -> Plan | None:
    """The re-check of a problem with these tests, or None when they have a shape this
    module cannot read."""
    trees = []
    for test in tests:
        try:
            trees.append(ast.parse(test))
        except SyntaxError:
            return None
    if io in ("call", "stdio"):
        found = [_harness(tree) for tree in trees]
        if len(found) != 1 or found[0] is None:
            return None
        return found[0]
    calls = [_asserts(tree) for tree in trees]
    if all(c is not None for c in calls):
        cases = [case for c in calls for case in c]
        if not cases:
            return None
        return _fetching(entry_point, "equal", cases, 0.0, target="")
    if any(_defines_check(tree) for tree in trees):
        checking = _CHECK.format(keep=entry_point) + helpers + "\n".join(tests)
        return Plan(checking, entry_point, "check")
    return None


def _defines_check(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in tree.body)


def _asserts(tree: ast.Module) -> list | None:
    """(name, args, expected) of `assert name(<literals>) == <literal>` statements."""
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
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        read.append((test.left.func.id, args, expected))
    return read


def _harness(tree: ast.Module) -> Plan | None:
    """The cases of a generated call or stdio harness (trainer/tasks/harness.py): its
    `_TROUPE_CASES` table, its `_TROUPE_TOLERANCE` and (call) the name it looks up."""
    table, target, tolerance = None, None, 0.0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            if name == "_TROUPE_TOLERANCE" and isinstance(node.value, ast.Constant):
                tolerance = float(node.value.value)
            if name == "_TROUPE_CASES" and isinstance(node.value, ast.Call) and node.value.args:
                first = node.value.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    table = json.loads(first.value)
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "_troupe_target"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            target = node.args[0].value
    if not isinstance(table, list) or not all(isinstance(c, list) and len(c) == 2 for c in table):
        return None
    if target is None:  # stdio: (input text, expected output text), run by `_troupe_run`
        cases = [("_troupe_run", (given,), want) for given, want in table]
        return _fetching("", "stdio", cases, tolerance, target="")
    cases = [(target, tuple(args), want) for args, want in table]
    return _fetching("", "call", cases, tolerance, target=target)


def _fetching(entry_point: str, rule: str, cases: list, tolerance: float, target: str):
    """A plan whose checker calls each case's function on its arguments and prints every
    result (or the name of what it raised) as one marshalled line; None when the expected
    values are too large for that line to come back whole."""
    calls = [(name, args) for name, args, _ in cases]
    expected = tuple(want for _, _, want in cases)
    try:
        if len(marshal.dumps(expected, 2)) > MAX_EXPECTED:
            return None
        table = marshal.dumps(calls, 2).hex()
    except ValueError:  # not plain data
        return None
    if target:  # the generated harness finds its function (or Solution method) once
        from trainer.tasks.harness import TARGET

        lookup = f"{TARGET}\n_troupe_f = _troupe_target({target!r})\n"
    else:
        lookup = "_troupe_f = None\n"
    tests = _FETCH.format(table=table, lookup=lookup)
    return Plan(tests, entry_point, rule, expected, tolerance)


# The checker's side of a re-check that fetches values. It never sees an expected value.
_FETCH = """
import marshal as _troupe_marshal

_TROUPE_CALLS = _troupe_marshal.loads(bytes.fromhex({table!r}))
{lookup}
_troupe_results = []
for _troupe_name, _troupe_args in _TROUPE_CALLS:
    _troupe_call = _troupe_f if _troupe_f is not None else globals()[_troupe_name]
    try:
        _troupe_results.append(("ok", _troupe_call(*_troupe_args)))
    except Exception as _troupe_error:
        _troupe_results.append(("raised", type(_troupe_error).__name__))
print(_troupe_marshal.dumps(_troupe_results, 2).hex())
"""

# HumanEval: nothing of the program but its entry point, then the prompt's helpers, then the
# problem's own `check(candidate)` tests.
_CHECK = """
for _troupe_name in [n for n in globals() if n not in ("__name__", "__builtins__", {keep!r})]:
    del globals()[_troupe_name]
"""


def agrees(plan: Plan, result) -> bool:
    """Whether the re-check (a sandbox result of `plan`'s job) says the program passes."""
    if not result.passed:
        return False
    if plan.rule == "check":
        return True
    lines = result.checker_stdout.strip().splitlines()
    try:
        from sandbox.plain import decode

        got = decode(bytes.fromhex(lines[-1]))
    except (IndexError, ValueError):
        return False
    if type(got) is not list or len(got) != len(plan.expected):
        return False
    for entry, want in zip(got, plan.expected):
        if type(entry) is not tuple or len(entry) != 2 or entry[0] != "ok":
            return False
        if plan.rule == "stdio":
            if type(entry[1]) is not str or not same_text(entry[1], want, plan.tolerance):
                return False
        elif not same_result(entry[1], want, plan.tolerance, json_values=plan.rule == "call"):
            return False
    return True


def same_result(got, want, tolerance: float = 0.0, *, json_values: bool = False) -> bool:
    """`got` is `want`, by the re-check's rules: exact types at every depth (`json_values`:
    `want` came from JSON, so a tuple may stand for a list, and a one-item list `[x]` also
    accepts `x`, as TACO wraps its answers), floats within `tolerance` (exactly, in
    rationals; NaN only for NaN, an infinity only for itself)."""
    if json_values and type(want) is list and len(want) == 1:
        if same_result(got, want[0], tolerance, json_values=True):
            return True
    todo = [(got, want, 0)]
    while todo:
        g, w, depth = todo.pop()
        kind = list if json_values and type(g) is tuple and type(w) is list else type(g)
        if depth > MAX_DEPTH or kind is not type(w):
            return False
        if kind is float:
            if not same_float(g, w, tolerance):
                return False
        elif kind is complex:
            parts = zip((g.real, g.imag), (w.real, w.imag))
            if not all(same_float(a, b, tolerance) for a, b in parts):
                return False
        elif kind in (list, tuple):
            if len(g) != len(w):
                return False
            todo.extend((a, b, depth + 1) for a, b in zip(g, w))
        elif kind is dict:
            if g.keys() != w.keys():
                return False
            todo.extend((g[k], w[k], depth + 1) for k in w)
        elif kind in (set, frozenset):
            if sorted(map(repr, g)) != sorted(map(repr, w)):  # {1} is not {True}
                return False
        elif g != w:  # None, bool, int, str, bytes
            return False
    return True


def same_float(got: float, want: float, tolerance: float) -> bool:
    """Both finite and |got - want| <= tolerance * max(1, |want|), in exact rationals; or
    both NaN; or the same infinity."""
    if math.isnan(got) or math.isnan(want):
        return math.isnan(got) and math.isnan(want)
    if math.isinf(got) or math.isinf(want):
        return got == want
    exact_want = Fraction(want)
    return abs(Fraction(got) - exact_want) <= Fraction(tolerance) * max(1, abs(exact_want))


def same_text(got: str, want: str, tolerance: float = 0.0) -> bool:
    """What a stdio program printed against the expected output (the normalisation of
    trainer/tasks/harness.py: lines as str.splitlines() splits them, trailing space and
    blank lines dropped, whitespace-separated tokens). A token is the same text, or, where
    the expected token is a decimal number with a point or an exponent, a printed decimal
    number within `tolerance` — both finite doubles, compared in exact rationals."""
    mine = [line.split() for line in got.splitlines() if line.strip()]
    theirs = [line.split() for line in want.splitlines() if line.strip()]
    if [len(line) for line in mine] != [len(line) for line in theirs]:
        return False
    for line, other in zip(mine, theirs):
        for a, b in zip(line, other):
            if a != b and not _same_number(a, b, tolerance):
                return False
    return True


def _same_number(got: str, want: str, tolerance: float) -> bool:
    expected = _NUMBER.fullmatch(want)
    if not expected or not (expected.group(1).count(".") or expected.group(2)):
        return False  # a word, or an integer: only the same text
    if not _NUMBER.fullmatch(got) or max(len(got), len(want)) > MAX_NUMBER_CHARS:
        return False
    if not (math.isfinite(float(got)) and math.isfinite(float(want))):
        return False  # before Fraction: 1e999999999 would take forever as an exact rational
    exact_want = Fraction(want)
    return abs(Fraction(got) - exact_want) <= Fraction(tolerance) * max(1, abs(exact_want))
