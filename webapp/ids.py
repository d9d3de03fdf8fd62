"""Whole numbers a request sends as text (ids, steps, sizes): one reading for every view.

`str.isdecimal()` is what `int()` takes (`isdigit()` is wider: "²"), but `int()` also refuses
more than 4,300 digits (Python's guard against slow conversions), so a number is at most
`MAX_DIGITS` long here: no id or size has more, and a longer one is simply not a number.
"""

from __future__ import annotations

MAX_DIGITS = 19  # a signed 64-bit integer


def whole_number(text) -> int | None:
    """`text` (str, or anything whose str is wanted) as a non-negative int, or None."""
    text = str(text).strip() if text is not None else ""
    return int(text) if text.isdecimal() and len(text) <= MAX_DIGITS else None
