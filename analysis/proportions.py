"""Intervals for rates: a cliff rate is a proportion of runs, and a difference of two lies in
[−1, 1] (docs/analysis.md, "Across seeds").

- `wilson`: Wilson's score interval of one proportion, from `scipy.stats.binomtest`.
- `paired_difference`: Newcombe's hybrid score interval (1998, "method 10") for the
  difference of two proportions measured on the same pairs — the two sharing modes of one
  seed. Each end combines the two Wilson intervals, corrected for the pairs' correlation φ,
  so it never leaves [−1, 1] and does not collapse to a point at 0/3 or 3/3 the way a
  Student-t interval over binary values does. scipy has Wilson but not Newcombe's
  combination, which is the few lines below.
- `combine`: a linear combination of estimates with their intervals (MOVER, Zou & Donner
  2008): the pooled difference over cells and the main effects of cliff rates. With weights
  that sum to at most 1 in absolute value it stays in [−1, 1] as its parts do.
- `pairs_needed`: the pairs McNemar's test wants (Connor 1987), the planning figure of a
  cliff-rate difference.

Coverage is checked by simulation (`tests/analysis/test_proportions_simulation.py`).
`scipy.stats` is imported on first use: it costs most of a second to import, which only
the statistics page pays (BENCHMARKS.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from analysis.intervals import Estimate, normal_quantile


@functools.lru_cache(maxsize=4096)  # a handful of (k, n) pairs, asked for again and again
def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for k successes in n trials (n ≥ 1)."""
    from scipy.stats import binomtest  # first use only: see the module docstring

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def paired_difference(
    first: Sequence[float], second: Sequence[float], level: float = 0.95
) -> Estimate:
    """second − first for binary outcomes (0/1) on the same pairs: the difference of the two
    rates with Newcombe's hybrid score interval for paired data (module docstring). No
    interval from no pairs."""
    n = len(first)
    if n != len(second):
        raise ValueError(f"{n} first outcomes for {len(second)} second ones")
    if n == 0:
        return Estimate(n=0, method="newcombe")
    both = sum(1 for a, b in zip(first, second, strict=True) if a and b)
    only_first = sum(1 for a, b in zip(first, second, strict=True) if a and not b)
    only_second = sum(1 for a, b in zip(first, second, strict=True) if b and not a)
    neither = n - both - only_first - only_second
    k1, k2 = both + only_first, both + only_second
    p1, p2 = k1 / n, k2 / n
    l1, u1 = wilson(k1, n, level)
    l2, u2 = wilson(k2, n, level)
    phi = _phi(both, only_first, only_second, neither)
    diff = p2 - p1
    down = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    up = math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return Estimate(
        n=n,
        mean=diff,
        sd=_sd([b - a for a, b in zip(first, second, strict=True)]),
        low=max(-1.0, diff - down),
        high=min(1.0, diff + up),
        method="newcombe",
    )


def _phi(both: int, only_first: int, only_second: int, neither: int) -> float:
    """The pairs' correlation φ as Newcombe's interval uses it: 0 where a margin is empty,
    and a positive correlation shrunk by n/2 in its numerator. Unshrunk, three concordant
    pairs make φ = 1 and the interval nearly a point (coverage 65% at n = 3, measured)."""
    n = both + only_first + only_second + neither
    k1, k2 = both + only_first, both + only_second
    margins = k1 * (n - k1) * k2 * (n - k2)
    if not margins:
        return 0.0
    num = both * neither - only_first * only_second
    if num > 0:
        num = max(num - n / 2, 0.0)
    return num / math.sqrt(margins)


def rate(outcomes: Sequence[float], level: float = 0.95) -> Estimate:
    """A proportion of 0/1 outcomes with its Wilson interval (none from no outcome)."""
    n = len(outcomes)
    if n == 0:
        return Estimate(n=0, method="wilson")
    k = sum(1 for x in outcomes if x)
    low, high = wilson(k, n, level)
    return Estimate(n=n, mean=k / n, sd=_sd(outcomes), low=low, high=high, method="wilson")


def combine(parts: Sequence[tuple[float, Estimate]]) -> Estimate:
    """Σ wᵢ · estimateᵢ with the MOVER interval: each end recovers its variance from the
    parts' own interval ends (a negative weight takes the opposite end). No interval unless
    every part has one."""
    if not parts or any(e.mean is None for _, e in parts):
        return Estimate(method="mover")
    total = sum(w * e.mean for w, e in parts)
    n = sum(e.n for _, e in parts)
    if any(e.low is None or e.high is None for _, e in parts):
        return Estimate(n=n, mean=total, method="mover")
    below = sum((w * ((e.mean - e.low) if w > 0 else (e.high - e.mean))) ** 2 for w, e in parts)
    above = sum((w * ((e.high - e.mean) if w > 0 else (e.mean - e.low))) ** 2 for w, e in parts)
    return Estimate(
        n=n,
        mean=total,
        low=total - math.sqrt(below),
        high=total + math.sqrt(above),
        method="mover",
    )


def pairs_needed(diffs: Sequence[float], *, alpha: float = 0.05, power: float = 0.80) -> int | None:
    """Pairs McNemar's test at `alpha` wants for `power` when the observed discordant rates
    are the truth (Connor 1987): n = ((z_{1−α/2}√ψ + z_power √(ψ − δ²)) / δ)², ψ the share
    of discordant pairs, δ their net direction. At least 2; None when δ = 0."""
    n = len(diffs)
    if not n:
        return None
    ups = sum(1 for d in diffs if d > 0)
    downs = sum(1 for d in diffs if d < 0)
    delta, psi = (ups - downs) / n, (ups + downs) / n
    if delta == 0:
        return None
    z_a, z_b = normal_quantile(1 - alpha / 2), normal_quantile(power)
    root = (z_a * math.sqrt(psi) + z_b * math.sqrt(max(0.0, psi - delta * delta))) / abs(delta)
    return max(2, math.ceil(root * root - 1e-9))


def _sd(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
