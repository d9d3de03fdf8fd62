"""Final-answer extraction and comparison for math tasks.

- `extract_boxed(text)`: the content of the last complete `\\boxed{...}` (or `\\fbox{...}`,
  or `\\boxed 5`), braces balanced, so `\\boxed{\\frac{1}{2}}` gives `\\frac{1}{2}`.
- `normalize_answer(s)`: a canonical string. Numbers become reduced fractions or integers
  (`0.50`, `\\frac{1}{2}`, `\\dfrac12`, `1/2` -> `1/2`; `2.0` -> `2`; `1,000` -> `1000`; `-0`
  -> `0`); LaTeX spacing, `\\left`/`\\right`, `$` delimiters, degree signs, units in
  `\\text{}` or as a trailing word (`5 \\text{ cm}`, `18 dollars`), a leading `x =` and a
  trailing period are dropped; spaces are removed. Percent: a trailing `%` / `\\%` is
  treated as a unit and dropped, so `50\\%` matches `50` but not `0.5`. A lone choice
  letter `(B)` becomes `B`.
- `answers_match(pred, gold)`: exact rational comparison (`fractions.Fraction`) when both
  sides are numbers, else equality of the normalized strings. No floating tolerance: `0.333`
  does not match `1/3`.
"""

from __future__ import annotations

import re
from fractions import Fraction

# `\boxed{`, `\fbox{` (braced) or `\boxed 5` (a bare token after whitespace).
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{|\\boxed[ \t]+(?=[^\s{])")
_BARE_TOKEN = re.compile(r"[^\s$]+")
_DELIMITERS = re.compile(r"^\$+|\$+$|^\\\(|\\\)$|^\\\[|\\\]$")
_SPACING = re.compile(r"\\(?:(?:left|right|displaystyle|quad|qquad)(?![A-Za-z])|[!,;: ])|~")
_FRAC_ALIASES = re.compile(r"\\[dt]frac")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_PERCENT = re.compile(r"\\?%$")
_TEXT = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox)\s*\{([^{}]*)\}(?:\^\{?[23]\}?)?"
)
_LHS = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)$")
_UNIT_WORD = re.compile(r"^([-+]?[\d.,/]+)\s+(?!pi\b)[A-Za-z]{2,}(?:\s+[A-Za-z]+)*$")
_GROUPED = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")  # 1,000 or 12,345.5
_MIXED = re.compile(r"^([-+]?)(\d+)\\frac\{(\d+)\}\{(\d+)\}$")  # 2\frac{1}{2} = 5/2
_FRAC = re.compile(r"\\frac\s*(?:\{([^{}]*)\}|(\d))\s*(?:\{([^{}]*)\}|(\d))")
_SQRT = re.compile(r"\\sqrt\s*(\d+|[A-Za-z])")
_CHOICE = re.compile(r"^\(?([A-E])\)?$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,4})?")
_MAX_NUMBER_CHARS = 400  # longer "numbers" are compared as strings, not parsed


def extract_boxed(text: str | None) -> str | None:
    """Content of the last complete, non-empty `\\boxed{...}` in `text`, else None."""
    if not text:
        return None
    for match in reversed(list(_BOXED.finditer(text))):
        if match.group().endswith("{"):
            content = _balanced(text, match.end())
        else:
            token = _BARE_TOKEN.match(text, match.end())
            content = token.group() if token else None
        if content is not None and content.strip():
            return content.strip()
    return None


def _balanced(text: str, start: int) -> str | None:
    """Text from `start` up to the `}` closing an already-open brace; None if never closed."""
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped brace (`\{`) does not open or close a group
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


def normalize_answer(s: str | None) -> str:
    """Canonical form of a final answer (see the module docstring); '' for nothing."""
    if s is None:
        return ""
    s = str(s).strip()
    if "\\boxed" in s or "\\fbox" in s:
        s = extract_boxed(s) or s
    s = s.replace("\u2212", "-").replace("{,}", ",").replace("\\$", "")
    for _ in range(3):  # delimiters may nest: $\( 5 \)$
        s = _DELIMITERS.sub("", s.strip()).strip()
    s = _SPACING.sub(" ", s)
    s = _FRAC_ALIASES.sub(r"\\frac", s)
    s = _DEGREES.sub("", s)
    s = _PERCENT.sub("", s.strip().rstrip(".").strip())
    s = _strip_text(s).strip()
    if match := _LHS.match(s):
        s = match.group(1).strip()
    if match := _UNIT_WORD.match(s):
        s = match.group(1)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if _GROUPED.match(s):
        s = s.replace(",", "")
    if match := _MIXED.match(s):
        sign, whole, num, den = match.groups()
        if int(den):
            value = int(whole) + Fraction(int(num), int(den))
            return _format(-value if sign == "-" else value)
    s = _FRAC.sub(_frac_to_slash, s)
    s = _SQRT.sub(r"\\sqrt{\1}", s)
    if match := _CHOICE.match(s):
        return match.group(1).upper()
    number = to_fraction(s)
    if number is not None:
        return _format(number)
    return s


def _strip_text(s: str) -> str:
    """`5 \\text{cm}` -> `5` (a unit next to a number); `\\text{(A)}` -> `(A)` (the answer)."""
    without = _TEXT.sub("", s)
    if re.search(r"\d", without):
        return without
    return _TEXT.sub(r"\1", s)


def _frac_to_slash(match: re.Match) -> str:
    num = match.group(1) if match.group(1) is not None else match.group(2)
    den = match.group(3) if match.group(3) is not None else match.group(4)
    a, b = to_fraction(num), to_fraction(den)
    if a is None or b is None or b == 0:
        return f"\\frac{{{num}}}{{{den}}}"
    text = _format(a / b)
    # Next to other symbols (`x\frac{1}{2}`), keep the fraction one term: `x(1/2)`.
    before = match.string[match.start() - 1] if match.start() else ""
    after = match.string[match.end()] if match.end() < len(match.string) else ""
    if (before.isalnum() or after.isalnum() or after == "\\") and "/" in text:
        return f"({text})"
    return text


def _format(number: Fraction) -> str:
    if number.denominator == 1:
        return str(number.numerator)
    return f"{number.numerator}/{number.denominator}"


def to_fraction(s: str | None) -> Fraction | None:
    """An exact rational for `12`, `-0.5`, `.5`, `1e3`, `3/4`, `-1.5/3`, else None."""
    if not s or len(s) > _MAX_NUMBER_CHARS:
        return None
    s = s.strip().replace(" ", "")
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    if "/" in s:
        num, _, den = s.partition("/")
        a, b = _decimal(num), _decimal(den)
        if a is None or b is None or b == 0:
            return None
        return a / b
    return _decimal(s)


def _decimal(s: str) -> Fraction | None:
    s = s.strip()
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    if not _NUMBER.fullmatch(s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(pred: str | None, gold: str | None) -> bool:
    """True when `pred` states the same answer as `gold` (see the module docstring)."""
    if pred is None or gold is None:
        return False
    p, g = normalize_answer(pred), normalize_answer(gold)
    if not p or not g:
        return False
    fp, fg = to_fraction(p), to_fraction(g)
    if fp is not None and fg is not None:
        return fp == fg
    return p == g
