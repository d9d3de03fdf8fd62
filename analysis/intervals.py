"""Student's t without scipy, and the mean with its interval across seeds (`mean_ci`).

The t quantile is computed exactly for integer degrees of freedom (closed-form t CDF,
inverted by bisection). `mean_ci` is the one interval method across seeds (docs/analysis.md,
"Across seeds"): the experiment page, the statistics page and the seed bands all use it or
its quantile.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable
from typing import Any

from analysis.series import as_number


def normal_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return 0.5 * math.erfc(x / math.sqrt(2))


def t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with integer df (Abramowitz & Stegun 26.7.3–4), exact."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, math.cos(theta)
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):  # cos θ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …)
                term *= c2 * (k - 1) / k
                total += term
        return 2 / math.pi * (theta + math.sin(theta) * total)
    total, term = 1.0, 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …
        term *= c2 * (k - 1) / k
        total += term
    return math.sin(theta) * total


@functools.lru_cache(maxsize=4096)  # pure, and asked for the same few (q, df) over and over
def student_t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with `df` degrees of freedom (q in (0, 1)), no scipy.

    Exact (bisection on the closed-form CDF, to 1e-12) for df ≤ 1000; beyond, the normal
    quantile with its first Cornish–Fisher correction, off by under 1e-6 there.
    """
    if not 0 < q < 1:
        raise ValueError(f"q must lie strictly between 0 and 1, not {q}")
    if df < 1 or int(df) != df:
        raise ValueError(f"df must be a positive integer, not {df}")
    df = int(df)
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -student_t_quantile(1 - q, df)
    if df > 1000:
        z = statistics.NormalDist().inv_cdf(q)
        return z + (z**3 + z) / (4 * df)
    mass = 2 * q - 1
    lo, hi = 0.0, 1.0
    while t_two_sided_mass(hi, df) < mass:
        hi *= 2
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_mass(mid, df) < mass else (lo, mid)
    return (lo + hi) / 2


def mean_ci(values: Iterable, level: float = 0.95) -> dict[str, Any]:
    """Mean and Student-t interval of the finite values: `{n, mean, low, high, half_width}`.

    None/NaN are dropped. n = 0: everything None; n = 1: the mean alone (no interval);
    n ≥ 2: mean ± t_{(1+level)/2, n−1} × sd / √n with the sample sd (ddof 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, not {level}")
    xs = [float(x) for x in values if as_number(x) is not None]
    n = len(xs)
    out: dict[str, Any] = {"n": n, "mean": None, "low": None, "high": None, "half_width": None}
    if n == 0:
        return out
    mean = math.fsum(xs) / n
    out["mean"] = mean
    if n >= 2:
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
        half = student_t_quantile((1 + level) / 2, n - 1) * sd / math.sqrt(n)
        out.update(low=mean - half, high=mean + half, half_width=half)
    return out


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), for x below
    (a + 1)/(a + b + 2), where it converges fast."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-14:
            break
    return result


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (x in [0, 1], a, b > 0)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    # The symmetry I_x(a, b) = 1 − I_{1−x}(b, a) keeps the fraction in its fast range.
    return 1 - math.exp(log_front) * _beta_continued_fraction(b, a, 1 - x) / b


def f_sf(f: float, df1: float, df2: float) -> float:
    """P(F > f) for Fisher's F with (df1, df2) degrees of freedom (real df allowed)."""
    if f <= 0:
        return 1.0
    return regularized_beta(df2 / (df2 + df1 * f), df2 / 2, df1 / 2)
