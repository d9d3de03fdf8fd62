"""Amplification onset of a role's `role/<role>/grad_norm` series (docs/design.md §6).

The baseline is the first `baseline_frac` (20%) of its logged points by count, at least 3; its
median m and unscaled median absolute deviation MAD = median|x − m| (no 1.4826 factor) give
the limit m + `k_mad` (3) × max(MAD, `mad_floor` (0.01) × |m|). The floor keeps a constant
baseline (MAD = 0) from flagging any wobble: the value must then rise by more than 3% of the
median. The onset is the first logged step of the first `consecutive` (3) consecutive logged
points above the limit (the baseline points included), or None. With the run's planned
length (`total_steps`) the baseline is fixed by step instead (`planned_amplification`, the
radar's rule). `lead` = cliff_onset − amplification onset, per role (`analysis.runs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.series import EPS, as_step, clean_series

AMPLIFICATION_DEFAULTS = {"baseline_frac": 0.2, "k_mad": 3.0, "consecutive": 3, "mad_floor": 0.01}


def amplification_baseline(
    steps: Sequence,
    values: Sequence,
    *,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    mad_floor: float = 0.01,
) -> dict[str, Any]:
    """The baseline behind `amplification_onset`: `median`, `mad` (unscaled), the `limit`
    m + k·max(MAD, floor·|m|), `n_baseline` points and `baseline_end` (its last step).

    All None (n_baseline 0) when the series has fewer than 3 logged points. The panel draws
    `limit` as a horizontal line over the role's gradient norm.
    """
    s, v = clean_series(steps, values)
    return _baseline(s, v, baseline_frac=baseline_frac, k_mad=k_mad, mad_floor=mad_floor)


def _baseline(
    s: np.ndarray, v: np.ndarray, *, baseline_frac: float, k_mad: float, mad_floor: float
) -> dict[str, Any]:
    n = len(v)
    # By count, not by step: logging intervals may differ between keys. At least 3 points so
    # the median and MAD are not a single value.
    nb = max(3, math.ceil(baseline_frac * n - EPS))
    if n < 3:
        return {"median": None, "mad": None, "limit": None, "n_baseline": 0, "baseline_end": None}
    nb = min(nb, n)
    window = v[:nb]
    median = float(np.median(window))
    mad = float(np.median(np.abs(window - median)))
    # With a constant baseline MAD = 0 and any wobble would exceed it; a floor relative to the
    # median requires a real rise (> 3% of the median at the defaults).
    spread = max(mad, mad_floor * abs(median), 1e-12)
    return {
        "median": median,
        "mad": mad,
        "limit": median + k_mad * spread,
        "n_baseline": nb,
        "baseline_end": as_step(s[nb - 1]),
    }


def planned_amplification(
    s: np.ndarray,
    v: np.ndarray,
    total_steps: float,
    *,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    consecutive: int = 3,
    mad_floor: float = 0.01,
) -> dict[str, Any] | None:
    """Amplification with the baseline fixed by the run's planned length, on a cleaned
    series: the points with step − first step < `baseline_frac` × `total_steps` (at least 3),
    judged once a point past that boundary is logged. `{"index" (of the onset), "limit",
    "seen_index"}` (seen: when both the run of points and the baseline are complete), or None.
    The radar and `summarize_run(total_steps=…)` both use it; on a finished run logged every
    step it equals the count-based `amplification_onset`."""
    if not len(s):
        return None
    inside = int(np.count_nonzero(s - s[0] < baseline_frac * total_steps - EPS))
    nb = max(3, inside)
    if inside == len(s) or len(s) < nb:
        return None  # the baseline is not complete until a point past it is logged
    base = _baseline(s[:nb], v[:nb], baseline_frac=1.0, k_mad=k_mad, mad_floor=mad_floor)
    above = (v > base["limit"] + EPS).astype(int)
    if len(v) < consecutive:
        return None
    hits = np.flatnonzero(
        np.convolve(above, np.ones(consecutive, dtype=int), "valid") == consecutive
    )
    if not len(hits):
        return None
    first = int(hits[0])
    return {
        "index": first,
        "limit": base["limit"],
        "seen_index": max(first + consecutive - 1, inside, nb - 1),
    }


def amplification_onset(
    steps: Sequence,
    values: Sequence,
    *,
    total_steps: float | None = None,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    consecutive: int = 3,
    mad_floor: float = 0.01,
) -> int | float | None:
    """First step of the first `consecutive` logged points above the baseline limit, or None.

    See the module docstring for the baseline (first 20% of points, ≥ 3; median + 3 × MAD,
    MAD floored at 1% of the median). Missing values are dropped, so "consecutive" means
    consecutive among the logged points. With `total_steps` (the run's planned length) the
    baseline is fixed by step instead (`planned_amplification`, the radar's rule).
    """
    if consecutive < 1:
        raise ValueError(f"consecutive must be at least 1, not {consecutive}")
    s, v = clean_series(steps, values)
    if total_steps:
        found = planned_amplification(
            s,
            v,
            total_steps,
            baseline_frac=baseline_frac,
            k_mad=k_mad,
            consecutive=consecutive,
            mad_floor=mad_floor,
        )
        return None if found is None else as_step(s[found["index"]])
    base = _baseline(s, v, baseline_frac=baseline_frac, k_mad=k_mad, mad_floor=mad_floor)
    if base["limit"] is None or len(v) < consecutive:
        return None
    above = (v > base["limit"] + EPS).astype(int)
    # Window sums: a run of `consecutive` points above the limit sums to `consecutive`.
    runs = np.convolve(above, np.ones(consecutive, dtype=int), mode="valid")
    hits = np.flatnonzero(runs == consecutive)
    return as_step(s[hits[0]]) if len(hits) else None
