"""Where a plot marks the gaps of a series: points logged with no finite value (NaN, ±inf;
the store keeps them as None). For the eye only, like `analysis.smoothing`: no verdict
reads it. The run page's sparklines and the panel's figures both place their red × here, so
the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence


def gap_marks(steps: Sequence, values: Sequence) -> list[tuple]:
    """(step, height) of each stretch of consecutive gaps, at its first step: the height of
    the last finite value before it, or of the first after it when none comes before; None
    when the series has no finite value at all (a figure with an axis of its own then has no
    height to give; the sparkline marks the middle of its box)."""
    marks = []
    previous = None  # the last finite value so far
    for i, (step, value) in enumerate(zip(steps, values, strict=True)):
        if value is not None:
            previous = value
            continue
        if i and values[i - 1] is None:
            continue  # one mark for a stretch of gaps
        level = previous
        if level is None:
            level = next((v for v in values[i:] if v is not None), None)
        marks.append((step, level))
    return marks


def gap_title(step) -> str:
    """A mark's hover text. The store cannot tell NaN from ±inf for every writer."""
    return f"NaN/inf at step {step}"


def lone_points(values: Sequence) -> list[bool]:
    """Which points have no finite neighbour (gaps or the ends on both sides): a line through
    them draws nothing, so they need a dot to be seen."""
    n = len(values)
    return [
        v is not None
        and (i == 0 or values[i - 1] is None)
        and (i == n - 1 or values[i + 1] is None)
        for i, v in enumerate(values)
    ]
