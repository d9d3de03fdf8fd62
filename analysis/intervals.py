"""Student's t, Fisher's F and the normal from scipy, and the mean with its interval across
seeds (`mean_ci`).

The distribution functions are `scipy.special`'s ufuncs (`stdtrit`, `stdtr`, `fdtrc`,
`ndtr`): the routines `scipy.stats` itself calls, tested by a community, at a microsecond a
call (the radar asks for a t quantile on every prefix of a run) and a quarter of the import
time of `scipy.stats` (BENCHMARKS.md). Troupe wrote its own t quantile, incomplete beta and F
survival function until scipy replaced them; `tests/analysis/test_scipy_statistics.py` holds
the tables they were checked against. `mean_ci` is the one interval method across seeds
(docs/analysis.md, "Across seeds"): the experiment page, the statistics page and the seed
bands all use it or its quantile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import special

from analysis.series import as_number


@dataclass(frozen=True)
class Estimate:
    """An estimate with its interval: the one shape every module passes (cells, the
    statistics page, attribution). `mean` is the estimate (a mean, a difference, a contrast
    or a share); `low` and `high` its interval, None where there is none (too few seeds);
    `n` how many values it stands on; `sd` their spread (ddof 1), `se` and `df` where a
    t-interval made it; `method` which interval ("t", "newcombe", "wilson", "mover",
    "bootstrap")."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    sd: float | None = None
    se: float | None = None
    df: int | None = None
    method: str = "t"

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width: a t-interval's ±, None without an interval."""
        return (self.high - self.low) / 2 if self.has_interval else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fields(self, names: Sequence[str]) -> dict[str, Any]:
        """The named fields, the way a page or the JSON serves an estimate (`("n", "mean",
        "sd", "low", "high")`: the statistics page's)."""
        return {name: getattr(self, name) for name in names}

    def as_share(self) -> dict[str, Any]:
        """`{"value", "low", "high"}`: the shape of an attribution's share, change and
        interaction in its stored result and the API (`analysis.attribution`)."""
        return {"value": self.mean, "low": self.low, "high": self.high}

    @classmethod
    def from_share(cls, share: Mapping[str, Any]) -> Estimate:
        """An attribution's stored `{"value", "low", "high"}` (a paired bootstrap over
        problems) read back into an `Estimate`."""
        return cls(mean=share["value"], low=share["low"], high=share["high"], method="bootstrap")


def normal_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return float(special.ndtr(-x))


def normal_quantile(q: float) -> float:
    """The q-quantile of the standard normal (q in (0, 1))."""
    if not 0 < q < 1:
        raise ValueError(f"q must lie strictly between 0 and 1, not {q}")
    return float(special.ndtri(q))


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    return float(special.stdtr(df, -t))


@functools.lru_cache(maxsize=4096)  # pure, and asked for the same few (q, df) over and over
def student_t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with `df` degrees of freedom (q in (0, 1), df a
    positive whole number)."""
    if not 0 < q < 1:
        raise ValueError(f"q must lie strictly between 0 and 1, not {q}")
    if df < 1 or int(df) != df:
        raise ValueError(f"df must be a positive integer, not {df}")
    return float(special.stdtrit(int(df), q))


def mean_ci(values: Iterable, level: float = 0.95) -> Estimate:
    """Mean and Student-t interval of the finite values, as an `Estimate` (`n`, `mean`, `low`,
    `high`, `sd`, `se`, `df`; `half_width` the ±).

    None/NaN are dropped. n = 0: everything None; n = 1: the mean alone (no interval);
    n ≥ 2: mean ± t_{(1+level)/2, n−1} × sd / √n with the sample sd (ddof 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, not {level}")
    xs = [float(x) for x in values if as_number(x) is not None]
    n = len(xs)
    if n == 0:
        return Estimate(n=0)
    mean = math.fsum(xs) / n
    if n == 1:
        return Estimate(mean=mean, n=1)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    se = sd / math.sqrt(n)
    half = student_t_quantile((1 + level) / 2, n - 1) * se
    return Estimate(mean=mean, low=mean - half, high=mean + half, n=n, sd=sd, se=se, df=n - 1)


def f_sf(f: float, df1: float, df2: float) -> float:
    """P(F > f) for Fisher's F with (df1, df2) degrees of freedom (real df allowed)."""
    if f <= 0:
        return 1.0
    return float(special.fdtrc(df1, df2, f))
