"""The generated test harnesses of loaded code datasets, and the comparisons they run.

A DeepCoder/TACO problem's tests are turned into one check program (`call_tests`,
`stdio_tests`) that the sandbox's checker runs against the program's names
(sandbox/checker.py). The comparison is the checker's, written here as source text, and
built so that no wrong answer satisfies it:

Values (`call`: the function's result against the expected JSON value, `_troupe_same`):
- an integer answer matches an `int` equal to it, exactly (no float, no bool: `True` is not 1,
  `3.0` is not 3, and `3000000021.0 + 900` is not 3000000021);
- a float answer matches a `float` when both are finite and |got - want| <= tolerance *
  max(1, |want|), the tolerance stated by the problem (`TOLERANCE` unless the row gives its
  own); NaN matches only NaN and ±inf only the same infinity, only where the expected value
  is one;
- True/False, None and strings match only themselves (strings exactly);
- a list matches a list or tuple (JSON has no tuples) of the same length whose items match,
  at any depth; a dict matches a dict with the same keys whose values match;
- TACO wraps expected values in a one-item list: `[x]` also accepts what matches `x`.

Text (`stdio`: what the program printed against the expected output, `_troupe_same_text`),
after this normalisation: trailing whitespace of each line and blank lines are dropped, and
each line is split into whitespace-separated tokens. Two outputs match when they have the
same number of lines, each with the same number of tokens, and each pair of tokens matches:
the same text, or — where the expected token is a decimal number with a point or an exponent
(`0.5`, `1e-3`, ASCII digits) — a printed decimal number within the tolerance, both finite as
doubles. An integer
token (`42`) matches only the same text; `nan`, `inf` and words only themselves.

trainer/tasks/second_opinion.py compares the same things with code of its own; one table of
cases (tests/trainer/comparison_cases.py) holds both to these rules.
"""

from __future__ import annotations

import json

TOLERANCE = 1e-6  # relative (absolute below 1) error allowed in a float answer, by default

_SAME = """
import math as _troupe_math
import re as _troupe_re

_TROUPE_TOLERANCE = {tolerance!r}
_TROUPE_INT = _troupe_re.compile(r"[-+]?[0-9]+")
_TROUPE_REAL = _troupe_re.compile(r"[-+]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][-+]?[0-9]+)?")


def _troupe_near(got, want):
    return abs(got - want) <= _TROUPE_TOLERANCE * max(1.0, abs(want))


def _troupe_close(got, want):
    if type(got) is not float:
        return False
    if _troupe_math.isnan(want):
        return _troupe_math.isnan(got)
    if _troupe_math.isinf(want) or _troupe_math.isinf(got):
        return got == want
    return not _troupe_math.isnan(got) and _troupe_near(got, want)


def _troupe_same_value(got, want, depth=0):
    if depth > 100:
        return False
    kind = type(want)
    if kind is float:
        return _troupe_close(got, want)
    if kind in (bool, int, str) or want is None:
        return type(got) is kind and got == want
    if kind is list:
        if type(got) not in (list, tuple) or len(got) != len(want):
            return False
        return all(_troupe_same_value(g, w, depth + 1) for g, w in zip(got, want))
    if kind is dict:
        if type(got) is not dict or len(got) != len(want) or not all(k in got for k in want):
            return False
        return all(_troupe_same_value(got[k], want[k], depth + 1) for k in want)
    return False


def _troupe_same(got, want):
    if _troupe_same_value(got, want):
        return True
    return type(want) is list and len(want) == 1 and _troupe_same_value(got, want[0])


def _troupe_lines(text):
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return [line.split() for line in lines if line]


def _troupe_same_token(got, want):
    if got == want:
        return True
    if _TROUPE_INT.fullmatch(want) or not _TROUPE_REAL.fullmatch(want):
        return False
    if not _TROUPE_REAL.fullmatch(got):
        return False
    a, b = float(got), float(want)
    return _troupe_math.isfinite(a) and _troupe_math.isfinite(b) and _troupe_near(a, b)


def _troupe_same_text(got, want):
    a, b = _troupe_lines(got), _troupe_lines(want)
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
        return False
    return all(_troupe_same_token(u, v) for x, y in zip(a, b) for u, v in zip(x, y))
"""

# Finds `name`: a function of the program, else a method of its `Solution` class.
TARGET = """
def _troupe_target(name):
    scope = globals()
    if callable(scope.get(name)):
        return scope[name]
    if "Solution" in scope:
        return getattr(scope["Solution"](), name)
    raise NameError(f"the program defines neither {name}() nor Solution.{name}()")
"""

_CALL_CHECK = """
import json as _json

_TROUPE_CASES = _json.loads({cases!r})
{same}
{target}

_troupe_f = _troupe_target({name!r})
for _troupe_i, (_troupe_args, _troupe_want) in enumerate(_TROUPE_CASES):
    _troupe_got = _troupe_f(*_troupe_args)
    assert _troupe_same(_troupe_got, _troupe_want), (
        f"case {{_troupe_i}}: expected {{_troupe_want!r}}, got {{_troupe_got!r}}"
    )
"""

# The program's side of a stdio test: runs the program (`_TROUPE_PROGRAM`) on one input and
# returns what it printed. It runs in the program's process; the checker only sees the text.
STDIO_RUNNER = """
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
{same}

for _troupe_i, (_troupe_in, _troupe_want) in enumerate(_TROUPE_CASES):
    _troupe_got = _troupe_run(_troupe_in)
    assert type(_troupe_got) is str, f"case {{_troupe_i}}: no output text"
    assert _troupe_same_text(_troupe_got, _troupe_want), (
        f"case {{_troupe_i}}: expected {{_troupe_want[:200]!r}}, got {{_troupe_got[:200]!r}}"
    )
"""


def _same(tolerance: float) -> str:
    tolerance = float(tolerance)
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"a float tolerance must be in [0, 1), got {tolerance}")
    return _SAME.format(tolerance=tolerance)


def call_tests(
    entry_point: str, cases: list[tuple[list, object]], tolerance: float = TOLERANCE
) -> tuple[str, ...]:
    """A check program calling `entry_point(*args)` on each (args, expected) case."""
    table = json.dumps([[list(a), w] for a, w in cases])
    return (
        _CALL_CHECK.format(cases=table, same=_same(tolerance), target=TARGET, name=entry_point),
    )


def stdio_tests(cases: list[tuple[str, str]], tolerance: float = TOLERANCE) -> tuple[str, ...]:
    """A harness running the program (`_TROUPE_PROGRAM`) once per (stdin, expected stdout)."""
    table = json.dumps([[i, o] for i, o in cases])
    return (_STDIO_CHECK.format(cases=table, same=_same(tolerance)),)


def stdio_program(program: str) -> str:
    """What runs in the program's process for a stdio problem: the program as text, and the
    function that runs it on one input."""
    return f"_TROUPE_PROGRAM = {program!r}\n{STDIO_RUNNER}"
