"""Amplification onset of a role's `role/<role>/grad_norm` series (docs/design.md §6).

The baseline is the first `baseline_frac` (20%) of its logged points by count, at least 3.
Only points that carry signal count in it: a GRPO step whose groups all had zero advantage
puts (almost) no gradient on the policy, and a baseline of such zeros would make any later
value look like a rise (a limit of 3e-12 once raised alarms). A point carries signal when it exceeds
`SIGNAL_FRAC` (1e-3) of the largest baseline value and the absolute `dust_floor` (1e-5):
a baseline made only of dust (norms of 1e-7…2e-7 for ten steps, then ≈0.05, once gave limits
of 1.9e-07 and "amplification confirmed") has no point above the floor, since the largest
value of dust is dust. With fewer than `min_signal` (3) such points the verdict is "too few
steps to judge" (`status` "too_few_steps"), not "none".

From the signal points: median m and unscaled median absolute deviation MAD = median|x − m|
(no 1.4826 factor); the limit is the larger of m + `k_mad` (3) × max(MAD, `mad_floor` (0.01)
× |m|) and the largest baseline value: a rise must leave the run's own early range, so a
step-1 norm of 0.106 makes a later 0.056 no amplification. The floor keeps a constant
baseline (MAD = 0) from flagging any wobble. The onset is the first logged step of the first
`consecutive` (3) consecutive logged points above the limit, or None. With the run's planned
length (`total_steps`) the baseline is fixed by step instead (`planned_amplification`, the
radar's rule). `lead` = cliff_onset − amplification onset, per role (`analysis.runs`).
`amplification_verdict` gives the onset with its status; every page and the radar use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.series import EPS, as_step, clean_series

AMPLIFICATION_DEFAULTS = {
    "baseline_frac": 0.2,
    "k_mad": 3.0,
    "consecutive": 3,
    "mad_floor": 0.01,
    "min_signal": 3,
    "dust_floor": 1e-5,
}
# A baseline point carries signal above this fraction of the baseline's largest value: a step
# with no signal logs exactly 0 or float dust (1e-12), far below any real gradient norm.
SIGNAL_FRAC = 1e-3
# Why an absolute floor and not one relative to the run's typical norm: the radar judges a
# baseline once and keeps the event (docs/analysis.md, "The radar's events are unique"); a
# floor that moved with later points would retract alerts. Real policy gradient norms are
# 1e-3 and up (tiny models ≈0.05, clipped LLM updates 0.1–10); a zero-advantage step logs
# exactly 0 or float rounding (1e-7 and below), so 1e-5 sits two decades from each.
AMPLIFIED, NO_AMPLIFICATION, TOO_FEW_STEPS = "amplified", "none", "too_few_steps"


def amplification_baseline(
    steps: Sequence,
    values: Sequence,
    *,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    mad_floor: float = 0.01,
    min_signal: int = 3,
    dust_floor: float = 1e-5,
) -> dict[str, Any]:
    """The baseline behind `amplification_onset`: `median`, `mad` (unscaled), the `limit`
    (module docstring), `n_baseline` points, `n_signal` of them carrying signal and
    `baseline_end` (its last step).

    `limit` (and median, mad) None when the series has fewer than 3 logged points or the
    baseline fewer than `min_signal` signal points. The panel draws `limit` as a horizontal
    line over the role's gradient norm.
    """
    s, v = clean_series(steps, values)
    return _baseline(
        s,
        v,
        baseline_frac=baseline_frac,
        k_mad=k_mad,
        mad_floor=mad_floor,
        min_signal=min_signal,
        dust_floor=dust_floor,
    )


def _baseline(
    s: np.ndarray,
    v: np.ndarray,
    *,
    baseline_frac: float,
    k_mad: float,
    mad_floor: float,
    min_signal: int = 3,
    dust_floor: float = 1e-5,
) -> dict[str, Any]:
    n = len(v)
    # By count, not by step: logging intervals may differ between keys. At least 3 points so
    # the median and MAD are not a single value.
    nb = max(3, math.ceil(baseline_frac * n - EPS))
    out: dict[str, Any] = {
        "median": None,
        "mad": None,
        "limit": None,
        "n_baseline": 0,
        "n_signal": 0,
        "baseline_end": None,
    }
    if n < 3:
        return out
    nb = min(nb, n)
    window = v[:nb]
    top = float(np.max(np.abs(window)))
    signal = window[np.abs(window) > max(SIGNAL_FRAC * top, dust_floor)]
    out.update(n_baseline=nb, n_signal=len(signal), baseline_end=as_step(s[nb - 1]))
    if len(signal) < max(3, min_signal):
        return out  # zeros and dust are no baseline: "too few steps to judge"
    median = float(np.median(signal))
    mad = float(np.median(np.abs(signal - median)))
    # With a constant baseline MAD = 0 and any wobble would exceed it; a floor relative to the
    # median requires a real rise (> 3% of the median at the defaults). And a rise must leave
    # the early range itself: a value the baseline already reached is no amplification.
    spread = max(mad, mad_floor * abs(median))
    out.update(median=median, mad=mad, limit=max(median + k_mad * spread, float(signal.max())))
    return out


def planned_amplification(
    s: np.ndarray,
    v: np.ndarray,
    total_steps: float,
    *,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    consecutive: int = 3,
    mad_floor: float = 0.01,
    min_signal: int = 3,
    dust_floor: float = 1e-5,
) -> dict[str, Any] | None:
    """Amplification with the baseline fixed by the run's planned length, on a cleaned
    series: the points with step − first step < `baseline_frac` × `total_steps` (at least 3),
    judged once a point past that boundary is logged. None while the baseline is not complete;
    else `{"index" (of the onset, or None), "limit" (None: too few signal points),
    "seen_index"}` (seen: when both the run of points and the baseline are complete).
    The radar and `summarize_run(total_steps=…)` both use it; on a finished run logged every
    step it equals the count-based `amplification_onset`."""
    if not len(s):
        return None
    inside = int(np.count_nonzero(s - s[0] < baseline_frac * total_steps - EPS))
    nb = max(3, inside)
    if inside == len(s) or len(s) < nb:
        return None  # the baseline is not complete until a point past it is logged
    base = _baseline(
        s[:nb],
        v[:nb],
        baseline_frac=1.0,
        k_mad=k_mad,
        mad_floor=mad_floor,
        min_signal=min_signal,
        dust_floor=dust_floor,
    )
    first = _first_above(v, base["limit"], consecutive)
    seen = max(nb - 1, inside) if first is None else max(first + consecutive - 1, inside, nb - 1)
    return {"index": first, "limit": base["limit"], "seen_index": seen}


def _first_above(v: np.ndarray, limit: float | None, consecutive: int) -> int | None:
    """Index of the first of `consecutive` values above `limit`, or None."""
    if limit is None or len(v) < consecutive:
        return None
    above = (v > limit + EPS).astype(int)
    # Window sums: a run of `consecutive` points above the limit sums to `consecutive`.
    runs = np.convolve(above, np.ones(consecutive, dtype=int), mode="valid")
    hits = np.flatnonzero(runs == consecutive)
    return int(hits[0]) if len(hits) else None


def amplification_verdict(
    steps: Sequence,
    values: Sequence,
    *,
    total_steps: float | None = None,
    baseline_frac: float = 0.2,
    k_mad: float = 3.0,
    consecutive: int = 3,
    mad_floor: float = 0.01,
    min_signal: int = 3,
    dust_floor: float = 1e-5,
) -> dict[str, Any]:
    """`{"onset", "status", "limit"}`: the onset step (or None), the status "amplified",
    "none" or "too_few_steps" (no baseline of `min_signal` signal points yet, or fewer points
    than a baseline and a run above it need), and the limit (None without a baseline).

    See the module docstring for the rule. Missing values are dropped, so "consecutive"
    means consecutive among the logged points. With `total_steps` (the run's planned length)
    the baseline is fixed by step instead (`planned_amplification`, the radar's rule).
    """
    if consecutive < 1:
        raise ValueError(f"consecutive must be at least 1, not {consecutive}")
    s, v = clean_series(steps, values)
    base_kw = {
        "k_mad": k_mad,
        "mad_floor": mad_floor,
        "min_signal": min_signal,
        "dust_floor": dust_floor,
    }
    if total_steps:
        found = planned_amplification(
            s, v, total_steps, baseline_frac=baseline_frac, consecutive=consecutive, **base_kw
        )
        if found is None or found["limit"] is None:
            return {"onset": None, "status": TOO_FEW_STEPS, "limit": None}
        first, limit = found["index"], found["limit"]
    else:
        limit = _baseline(s, v, baseline_frac=baseline_frac, **base_kw)["limit"]
        if limit is None:
            return {"onset": None, "status": TOO_FEW_STEPS, "limit": None}
        first = _first_above(v, limit, consecutive)
    if first is None:
        return {"onset": None, "status": NO_AMPLIFICATION, "limit": limit}
    return {"onset": as_step(s[first]), "status": AMPLIFIED, "limit": limit}


def amplification_onset(steps: Sequence, values: Sequence, **kw: Any) -> int | float | None:
    """First step of the first `consecutive` logged points above the baseline limit, or None
    (`amplification_verdict`'s onset; it takes the same keywords)."""
    return amplification_verdict(steps, values, **kw)["onset"]


def amplification_label(status: str | None, onset: int | float | None) -> str:
    """A role's amplification verdict in words, the same in every table: "@140" (amplified
    from step 140), "not amplified", or "too few steps to judge" (no baseline of real signal
    yet: zeros, float dust, or too few points)."""
    if status == AMPLIFIED and onset is not None:
        return f"@{onset}"
    if status == NO_AMPLIFICATION:
        return "not amplified"
    return "too few steps to judge"
