"""Plain metric series as the analysis takes them: cleaning, steps, numbers, alignment.

Every verdict reads its series through `clean_series`: NaN or None = missing, dropped; steps
need not be sorted; a step given twice keeps its last value (as a re-written point does).
Outputs are Python ints, floats and None (`as_step`, `as_number`), ready for `json.dumps`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# Comparisons against thresholds ignore float noise (0.3 - 0.1 must not count as below 0.2).
EPS = 1e-9


def clean_series(steps: Sequence, values: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Pairs sorted by step, missing values dropped, a repeated step keeping its last value."""
    if len(steps) != len(values):
        raise ValueError(f"steps and values differ in length ({len(steps)} != {len(values)})")
    s = np.asarray(list(steps), dtype=float)
    v = np.asarray([np.nan if x is None else x for x in values], dtype=float)
    keep = np.isfinite(v) & np.isfinite(s)
    s, v = s[keep], v[keep]
    s, v = sort_unique(s, v)
    return s, v


def sort_unique(s: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    # Stable sort keeps input order among equal steps; the last one wins, as on a re-write.
    last = np.append(s[1:] != s[:-1], True) if len(s) else np.zeros(0, dtype=bool)
    return s[last], v[last]


def as_step(x: float) -> int | float:
    """A step as a Python int when it is whole (it nearly always is)."""
    x = float(x)
    return int(x) if x.is_integer() else x


def as_number(x: Any) -> float | None:
    """A Python float, or None for missing/NaN (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def rolling_median(v: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median; the window shrinks at the ends (pandas' min_periods=1)."""
    half = window // 2
    n = len(v)
    if n <= window:
        return np.array([np.median(v[max(0, i - half) : i + half + 1]) for i in range(n)])
    # Full windows in one vectorised call; only the `half` shrunken windows at each end loop.
    out = np.empty(n)
    out[half : n - half] = np.median(np.lib.stride_tricks.sliding_window_view(v, window), axis=1)
    for i in (*range(half), *range(n - half, n)):
        out[i] = np.median(v[max(0, i - half) : i + half + 1])
    return out


def names_between(series: Mapping[str, Any], prefix: str, suffix: str) -> list[str]:
    return sorted(
        {
            k[len(prefix) : -len(suffix)]
            for k in series
            if k.startswith(prefix) and k.endswith(suffix) and len(k) > len(prefix) + len(suffix)
        }
    )


def align_by_step(by_role: Mapping[str, tuple[Sequence, Sequence]]) -> tuple[list, dict[str, list]]:
    """Per-role (steps, values) → one step axis with NaN where a role was not logged."""
    points = {role: dict(zip(st, va, strict=True)) for role, (st, va) in by_role.items()}
    steps = sorted({s for p in points.values() for s in p})
    return steps, {role: [p.get(s, math.nan) for s in steps] for role, p in points.items()}
