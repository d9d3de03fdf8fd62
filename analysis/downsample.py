"""`downsample` thins a long series for plotting (first, last, each bucket's minimum and
maximum, and its first gap where NaN or ±inf was logged): the rule the metrics API applies
for `max_points` (docs/design.md §7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from analysis.series import sort_unique


def downsample(steps: Sequence, values: Sequence, max_points: int) -> dict[str, list]:
    """At most `max_points` points of a series for plotting: `{"steps": […], "values": […]}`.

    Steps come back sorted and unique (a repeated step keeps its last value); a gap (None,
    NaN, ±inf: a logged NaN loss is itself a signal) becomes None, which JSON can carry.
    `max_points=0` (or a series that already fits) returns every point. Otherwise the
    first and last points are kept and the points between are cut into equal-count buckets,
    each keeping its minimum and its maximum (so spikes and collapses survive, unlike plain
    striding) — (max_points − 2) // 2 buckets. When the series has gaps inside, each bucket
    also keeps its first gap ((max_points − 2) // 3 buckets then), so no stretch that held a
    NaN is drawn as an unbroken line and every gap's marker has a point to sit on; a value is
    never averaged with another. `max_points=1` gives the last point; `max_points=2` the
    ends; below 5 points a series with gaps keeps the ends and its first gap, one without
    them the ends and the interior point farthest from them. Vectorised: 10⁶ points take a
    fraction of a second.
    """
    if max_points < 0:
        raise ValueError(f"max_points must be 0 (everything) or positive, not {max_points}")
    if len(steps) != len(values):
        raise ValueError(f"steps and values differ in length ({len(steps)} != {len(values)})")
    s = np.asarray(list(steps) if not isinstance(steps, np.ndarray) else steps, dtype=float)
    v = np.asarray(
        values if isinstance(values, np.ndarray) else [np.nan if x is None else x for x in values],
        dtype=float,
    )
    s, v = sort_unique(s, v)
    n = len(s)
    if max_points and n > max_points:
        inner_gaps = ~np.isfinite(v[1:-1])
        per_bucket = 3 if inner_gaps.any() else 2
        if max_points == 1:
            keep = np.array([n - 1])
        elif max_points == 2:
            keep = np.array([0, n - 1])
        elif (max_points - 2) // per_bucket < 1 or max_points == 3:
            # Too few points for a bucket: the one interior point kept is the first gap, else
            # the extreme (a peak or a collapse is what a plot of three must not lose).
            gaps = np.flatnonzero(inner_gaps)
            middle = 1 + gaps[0] if len(gaps) else 1 + _extreme(v)
            keep = np.array([0, middle, n - 1])
        else:
            keep = _minmax_buckets(v, (max_points - 2) // per_bucket, per_bucket == 3)
        s, v = s[keep], v[keep]
    whole = bool(np.all(s == np.round(s)))
    return {
        "steps": s.astype(np.int64).tolist() if whole else s.tolist(),
        "values": [x if math.isfinite(x) else None for x in v.tolist()],
    }


def _extreme(v: np.ndarray) -> int:
    """Index among v[1:-1] (all finite) of the point that strays farthest from the ends."""
    inner, ends = v[1:-1], v[[0, -1]]
    ref = np.nanmean(ends) if np.isfinite(ends).any() else np.mean(inner)
    high, low = int(np.argmax(inner)), int(np.argmin(inner))
    return low if ref - inner[low] > inner[high] - ref else high


def _minmax_buckets(v: np.ndarray, buckets: int, gaps: bool) -> np.ndarray:
    """Indices of the first and last points and each interior bucket's min and max (and,
    with `gaps`, its first non-finite point)."""
    n = len(v)
    ends = np.array([0, n - 1])
    interior = n - 2
    if buckets < 1 or interior < 1:
        return ends
    # Equal-count contiguous buckets over the interior points 1 … n−2.
    starts = 1 + (np.arange(buckets) * interior) // buckets
    sizes = np.diff(np.append(starts, n - 1))
    inner = v[1 : n - 1]
    finite = np.isfinite(inner)
    # Missing values never win a bucket's min or max; an all-missing bucket keeps its first
    # point (its "minimum" is then +inf, matched by that missing point).
    low = np.where(finite, inner, np.inf)
    high = np.where(finite, -inner, np.inf)
    picks = [ends]
    for key in (low, high):
        best = np.minimum.reduceat(key, starts - 1)
        hits = np.flatnonzero(key == np.repeat(best, sizes))  # O(n), no sort
        # First hit at or after each bucket's start is that bucket's earliest extreme.
        picks.append(1 + hits[np.searchsorted(hits, starts - 1)])
    if gaps:
        # Each bucket's first gap: the smallest index among its non-finite points.
        where = np.where(finite, interior, np.arange(interior))
        first = np.minimum.reduceat(where, starts - 1)
        picks.append(1 + first[first < interior])
    return np.unique(np.concatenate(picks))
