"""Curves with seed bands: many runs' series of one key → mean, 95% interval, min and max per
step, optionally smoothed, optionally grouped by a config field.

Torch-free (numpy and pandas); the compare pages call it.

- Display smoothing (`analysis.smoothing.smooth_series`: EMA or a trailing mean) is applied
  to each run's own logged points before alignment, in step order.
- Alignment: `"union"` keeps every step any run logged, each step's statistics over the runs
  that logged it (no interpolation; `n` says how many); `"intersection"` keeps only the steps
  every run logged.
- The interval is Student-t: mean ± t_{(1+level)/2, n−1} · sd / √n (sd with ddof 1, the
  quantile from `analysis.intervals.student_t_quantile`); None where fewer than two runs
  logged the step.
  It is the interval of the mean across seeds at that step, not a band holding 95% of runs.

Missing values (None, NaN) are dropped per run; a repeated step keeps its last value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.intervals import student_t_quantile
from analysis.smoothing import smooth_series


def seed_bands(
    runs: Sequence[tuple[Sequence, Sequence]],
    *,
    align: str = "union",
    smoothing: str | None = None,
    alpha: float = 0.1,
    window: int = 5,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Per-step statistics of several runs' `(steps, values)` for one key.

    Returns `{"steps", "n", "mean", "low", "high", "min", "max", "n_runs"}`: lists aligned on
    `steps` (sorted), `low`/`high` None where n < 2; `n_runs` the number of runs with at least
    one point. Steps no run has (after alignment) are not listed. `bounds` (e.g. (0, 1) for an
    accuracy) clips the interval to the values the metric can take: a t-interval of three
    seeds near 0 otherwise runs below an accuracy of 0.
    """
    if align not in ("union", "intersection"):
        raise ValueError(f"align must be 'union' or 'intersection', not {align!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, not {level}")
    cleaned = [smooth_series(s, v, method=smoothing, alpha=alpha, window=window) for s, v in runs]
    cleaned = [(s, v) for s, v in cleaned if len(s)]
    out: dict[str, Any] = {k: [] for k in ("steps", "n", "mean", "low", "high", "min", "max")}
    out["n_runs"] = len(cleaned)
    if not cleaned:
        return out
    if align == "union":
        grid = np.unique(np.concatenate([s for s, _ in cleaned]))
    else:
        grid = cleaned[0][0]
        for s, _ in cleaned[1:]:
            grid = np.intersect1d(grid, s)
    table = np.full((len(cleaned), len(grid)), np.nan)  # (runs, steps)
    for i, (s, v) in enumerate(cleaned):
        idx = np.searchsorted(grid, s)
        ok = (idx < len(grid)) & (grid[np.minimum(idx, len(grid) - 1)] == s)
        table[i, idx[ok]] = v[ok]
    n = np.isfinite(table).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(table, axis=0) if len(grid) else np.zeros(0)
        sd = np.sqrt(np.nansum((table - mean) ** 2, axis=0) / np.maximum(n - 1, 1))
    tq = {k: student_t_quantile((1 + level) / 2, k - 1) for k in set(n.tolist()) if k >= 2}
    half = np.array([tq[k] if k >= 2 else math.nan for k in n.tolist()]) * sd / np.sqrt(n)
    whole = bool(np.all(grid == np.round(grid)))
    out["steps"] = grid.astype(np.int64).tolist() if whole else grid.tolist()
    out["n"] = n.tolist()
    out["mean"] = mean.tolist()
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    out["low"] = [None if k < 2 else x for k, x in zip(n.tolist(), low.tolist())]
    out["high"] = [None if k < 2 else x for k, x in zip(n.tolist(), high.tolist())]
    out["min"] = np.nanmin(table, axis=0).tolist() if len(grid) else []
    out["max"] = np.nanmax(table, axis=0).tolist() if len(grid) else []
    return out


def group_bands(runs: Sequence[Mapping[str, Any]], by: str, **options: Any) -> list[dict[str, Any]]:
    """`seed_bands` per value of the config field `by`, from `{"config": {...}, "series":
    (steps, values)}` runs: `[{"value", "runs" (count), "band"}]`, sorted by the value's text
    (runs without the field form the group whose value is None, listed last)."""
    groups: dict[Any, list] = {}
    for run in runs:
        groups.setdefault((run.get("config") or {}).get(by), []).append(run["series"])
    order = sorted(groups, key=lambda v: (v is None, str(v)))
    return [
        {"value": v, "runs": len(groups[v]), "band": seed_bands(groups[v], **options)}
        for v in order
    ]
