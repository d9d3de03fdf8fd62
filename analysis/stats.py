"""Statistics across the seeds of an experiment: intervals, effects, verdicts, seeds needed.

Torch-free (standard library, numpy and scipy); the web pages and the CLI call it on the per-run
§6 summaries. Every random draw comes from `numpy.random.default_rng(seed)` with a fixed
`seed` (0), so the same inputs give the same numbers on every call.

Runs are `{"cell": {workflow, task, model, sharing}, "seed", "summary": summarize_run(...)}`,
the input of `analysis.cells.summarize_cells`. The metrics read from a summary
(`run_metrics`):
`peak`, `final`, `gain`, `final_gain` (from `summary["accuracy"]`) and `cliff` — 1.0 when the
cliff status is "cliff" or "provisional", 0.0 when "none" or "degradation", missing when
"insufficient" or "too_low" (no verdict) — so
the mean of `cliff` over runs is the cliff rate. A missing metric drops that run from that
metric only.

Intervals across seeds are Student-t intervals, the one method of both the experiment page
(`analysis.intervals.mean_ci`) and the statistics page, because with 3–10 seeds a percentile
bootstrap
undercovers (it cannot see beyond the seeds' own range). Seeds are the replication unit:

- no interval and no verdict from fewer than `MIN_SEEDS` (3) seeds in a cell: "insufficient:
  fewer than 3 seeds";
- a cell's effect: the t-interval of its paired differences (df n − 1);
- the pooled effect over cells treats cells as cells: the unweighted mean of the cells'
  mean differences, each with its own seed variance, SE = √(Σ sᶜ²/nᶜ)/k and the
  Welch–Satterthwaite df (floored, so the interval errs wide); only cells with at least
  `MIN_SEEDS` pairs enter it (the verdict says "from k of K cells" when some did not). When
  those cells disagree (`heterogeneity`: Welch's test of equal means at 0.05, or two cells
  decided in opposite directions) there is no pooled interval: "cells disagree: see each
  cell" (`tests/analysis/test_stats_simulation.py` checks coverage);
- a cliff rate with no cliff in any run of the cell (or of any cell) is "no cliffs"
  (decision "no_cliffs"), not a degenerate interval [0, 0];
- a cliff rate is a proportion (`RATES`): a cell's difference has Newcombe's paired score
  interval, the pooled one and rate main effects combine the cells' intervals (MOVER), all
  inside [−1, 1] (`analysis.proportions`; `tests/analysis/test_proportions_simulation.py`);
- a main effect is the same kind of contrast of cell means (a level's cells against the
  average of the levels), so it exists only where every cell in it repeats seeds, and not
  where the other axes' cells disagree on it (`_strata_disagree`: Welch's test over them).

`bootstrap_mean_ci` is kept for comparisons over hundreds of problems, where it is sound.

Decisions: an interval entirely above 0 → the second level is higher; entirely below → the
first is higher; otherwise (0 inside or on the edge) "undecided: interval straddles 0". No
interval → "insufficient".

Seeds needed (`seeds_needed`): the normal-approximation sample size of a two-sided paired
test at α = 0.05 with 80% power, taking the observed mean difference d and the observed SD
of the differences s (ddof 1) as the truth: n = ⌈((z₀.₉₇₅ + z₀.₈₀) · s / |d|)²⌉ =
⌈(2.8016 · s/|d|)²⌉, at least 2; None when d = 0 exactly or s is unknown (fewer than two
pairs). It is a planning figure, not a promise: the observed d of an undecided cell is noisy,
so an undecided cell wants at least one pair more than it has (its t-interval can straddle 0
where the normal figure says its pairs should do), and a rate's figure is McNemar's
(`analysis.proportions.pairs_needed`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis.cells import MIN_SEEDS
from analysis.cliffs import UNJUDGED
from analysis.intervals import (
    Estimate,
    f_sf,
    mean_ci,
    normal_quantile,
    student_t_quantile,
)
from analysis.proportions import combine, paired_difference, pairs_needed, rate
from analysis.runs import RunSummary
from analysis.series import as_number, as_step
from vocabulary.names import CELL_AXES, GRAD_NORM, PER_ROLE, SHARED, role_key

N_BOOT = 10_000
N_PERM = 10_000
SEED = 0
METRICS = ("peak", "final", "gain", "final_gain", "cliff")
# The fields of an `Estimate` the statistics page and its JSON serve: a cell's mean of a
# metric, and an effect (which also says how its interval was made).
SUMMARY_FIELDS = ("n", "mean", "sd", "low", "high")
EFFECT_FIELDS = (*SUMMARY_FIELDS, "method")
INSUFFICIENT = f"not enough data: fewer than {MIN_SEEDS} seeds"
HETEROGENEITY_ALPHA = 0.05  # cells whose means differ at this level are not pooled
DISAGREE = "cells disagree: see each cell"
NO_CLIFFS = "no cliffs"
RATES = ("cliff",)  # metrics that are 0/1 per run: their intervals are for proportions
# Bootstrap resamples are drawn in chunks of at most this many indices (memory, not result).
_CHUNK = 2_000_000


# --- building blocks ---------------------------------------------------------------------------


def run_metrics(summary: Mapping[str, Any] | None) -> dict[str, float | None]:
    """peak, final, gain, final_gain and cliff (1.0 / 0.0 / None) of one `summarize_run`."""
    acc = RunSummary.of(summary).accuracy
    out = {name: as_number(getattr(acc, name)) for name in ("peak", "final", "gain", "final_gain")}
    status = acc.cliff_status
    out["cliff"] = None if status in UNJUDGED else float(status in ("cliff", "provisional"))
    return out


def _finite(values: Iterable) -> np.ndarray:
    return np.array([float(x) for x in values if as_number(x) is not None], dtype=float)


def _boot_means(strata: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means over all values of a stratified resample (each stratum resampled within itself,
    so every resample keeps the strata's sizes), `n_boot` of them."""
    total = np.zeros(n_boot)
    count = sum(len(x) for x in strata)
    for x in strata:
        k = len(x)
        rows = max(1, _CHUNK // max(k, 1))
        for lo in range(0, n_boot, rows):
            hi = min(n_boot, lo + rows)
            total[lo:hi] += x[rng.integers(0, k, size=(hi - lo, k))].sum(axis=1)
    return total / count


def _check(level: float, n_boot: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, not {level}")
    if int(n_boot) != n_boot or n_boot < 100:
        raise ValueError(f"n_boot must be a whole number of at least 100, not {n_boot}")


def _interval(boot: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def bootstrap_mean_ci(
    values: Iterable, *, level: float = 0.95, n_boot: int = N_BOOT, seed: int = SEED
) -> Estimate:
    """Mean and percentile-bootstrap interval of the finite values, as an `Estimate`
    (`n`, `mean`, `sd` with ddof 1, `low`, `high`; method "bootstrap"; None/NaN dropped).

    n = 0: all None; n = 1: mean only. Identical values give the degenerate interval
    [mean, mean].
    """
    _check(level, n_boot)
    x = _finite(values)
    n = len(x)
    if n < 2:
        return Estimate(mean=float(x.mean()) if n else None, n=n, method="bootstrap")
    boot = _boot_means([x], n_boot, np.random.default_rng(seed))
    low, high = _interval(boot, level)
    return Estimate(
        mean=float(x.mean()), sd=float(x.std(ddof=1)), low=low, high=high, n=n, method="bootstrap"
    )


def seeds_needed(
    mean_diff: float | None, sd_diff: float | None, *, alpha: float = 0.05, power: float = 0.80
) -> int | None:
    """Pairs (seeds per level) a two-sided paired test at `alpha` needs for `power` when the
    true mean difference is `mean_diff` and the SD of the differences `sd_diff`:
    ⌈((z_{1−α/2} + z_power) · sd / |mean|)²⌉, at least 2 (normal approximation; see the
    module docstring). None when the mean is 0 or missing, or the SD is missing."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie in (0, 1), not {alpha} and {power}")
    if mean_diff is None or sd_diff is None or mean_diff == 0:
        return None
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2) + statistics.NormalDist().inv_cdf(power)
    return max(2, math.ceil((z * sd_diff / abs(mean_diff)) ** 2 - 1e-9))


def decide(low: float | None, high: float | None, first: str, second: str) -> tuple[str, str]:
    """(decision, verdict) for an interval of (second − first): decision is "second_higher",
    "first_higher", "undecided" or "insufficient"; verdict says it in words."""
    if low is None or high is None:
        return "insufficient", INSUFFICIENT
    if low > 0:
        return "second_higher", f"{second} higher"
    if high < 0:
        return "first_higher", f"{first} higher"
    return "undecided", "undecided: interval straddles 0"


def t_estimate(values: Iterable, *, level: float = 0.95) -> Estimate:
    """Mean and Student-t interval over seeds as an `Estimate`; no interval from fewer than
    `MIN_SEEDS` values (sd from 2)."""
    x = _finite(values)
    ci = mean_ci(x, level) if len(x) >= MIN_SEEDS else Estimate()
    return Estimate(
        n=len(x),
        mean=float(x.mean()) if len(x) else None,
        sd=float(x.std(ddof=1)) if len(x) >= 2 else None,
        low=ci.low,
        high=ci.high,
    )


def t_mean_ci(values: Iterable, *, level: float = 0.95) -> dict[str, Any]:
    """`t_estimate` as the statistics JSON serves it: `{"n", "mean", "sd", "low", "high"}`."""
    return t_estimate(values, level=level).fields(SUMMARY_FIELDS)


def contrast_ci(parts: Sequence[tuple[float, np.ndarray]], *, level: float = 0.95) -> Estimate:
    """Σ wᶜ · mean(xᶜ) over cells c, with a t-interval from the cells' own seed variances:
    SE² = Σ wᶜ² sᶜ²/nᶜ, Welch–Satterthwaite df (floored). `parts`: (weight, values) per cell.
    No interval unless every cell has at least `MIN_SEEDS` values. An `Estimate` (`mean`
    the contrast, `n` the values, `se` and `df` with the interval)."""
    n = int(sum(len(x) for _, x in parts))
    if not parts or any(len(x) == 0 for _, x in parts):
        return Estimate(n=n)
    estimate = float(sum(w * x.mean() for w, x in parts))
    if any(len(x) < MIN_SEEDS for _, x in parts):
        return Estimate(mean=estimate, n=n)
    terms = [(w * w * x.var(ddof=1) / len(x), len(x) - 1) for w, x in parts]
    var = sum(v for v, _ in terms)
    denominator = sum(v * v / d for v, d in terms)
    # All cells without spread: the df is the seeds' (the interval is a point anyway).
    df = var * var / denominator if denominator > 0 else sum(d for _, d in terms)
    df = max(1, math.floor(df + 1e-9))
    half = student_t_quantile((1 + level) / 2, df) * math.sqrt(var)
    return Estimate(
        mean=estimate,
        low=estimate - half,
        high=estimate + half,
        n=n,
        se=math.sqrt(var),
        df=df,
    )


def _plan(out: dict[str, Any], n: int, needed: int | None) -> None:
    """`n_needed` (pairs the cell wants: at least MIN_SEEDS, else the planning figure
    `needed`) and `more_needed` (n_needed − n): at least 1 for an undecided effect, whose
    seeds so far did not decide it whatever a normal approximation says they should."""
    if out["decision"] == "insufficient":
        needed = max(MIN_SEEDS, needed or 0)
    elif needed is not None:
        needed = max(MIN_SEEDS, needed)
        if out["decision"] == "undecided":
            needed = max(needed, n + 1)
    out["n_needed"] = needed
    out["more_needed"] = None if needed is None else max(0, needed - n)


def _effect(x: np.ndarray, first: str, second: str, *, level: float) -> dict[str, Any]:
    """One cell's mean of differences (second − first), t-interval, verdict, seeds needed."""
    out = _effect_dict(t_estimate(x, level=level))
    out["decision"], out["verdict"] = decide(out["low"], out["high"], first, second)
    _plan(out, len(x), seeds_needed(out["mean"], out["sd"]))
    return out


def _rate_effect(
    pairs: Sequence[tuple[float, float]], first: str, second: str, *, level: float
) -> dict[str, Any]:
    """One cell's difference of cliff rates (second − first) over its pairs: Newcombe's
    interval for paired proportions (`analysis.proportions`), inside [−1, 1]; no interval
    from fewer than MIN_SEEDS pairs; seeds needed from McNemar's test."""
    est = paired_difference([a for a, _ in pairs], [b for _, b in pairs], level)
    if est.n < MIN_SEEDS:
        est = Estimate(mean=est.mean, n=est.n, sd=est.sd, method=est.method)
    out = _effect_dict(est)
    out["decision"], out["verdict"] = decide(out["low"], out["high"], first, second)
    _plan(out, est.n, pairs_needed([b - a for a, b in pairs]))
    return out


def _effect_dict(est: Estimate) -> dict[str, Any]:
    """The fields of an effect the page and API read, from its `Estimate`."""
    return est.fields(EFFECT_FIELDS)


def heterogeneity(
    cells: Sequence[np.ndarray],
    intervals: Sequence[tuple[float | None, float | None]] | None = None,
) -> dict[str, Any]:
    """Do the cells' mean differences disagree beyond their seed noise? Welch's test of equal
    means (heteroscedastic one-way ANOVA: each cell its own variance), on cells with at least
    `MIN_SEEDS` values. `{"k" (cells), "F", "df1", "df2", "p", "disagree"}`; with fewer than
    two cells nothing can disagree (p None).

    A cell whose seeds agree exactly (variance 0: a cliff rate of 0 in every seed) takes the
    mean variance of the other cells; when no cell has any spread, the cells disagree exactly
    when their means differ. Two cells decided in opposite directions always disagree: by
    `intervals` (each cell's (low, high), aligned with `cells`) where given, else by each
    cell's t-interval.
    """
    if intervals is None:
        intervals = [(ci.low, ci.high) for ci in map(mean_ci, cells)]
    kept = [(np.asarray(x, float), ci) for x, ci in zip(cells, intervals, strict=True)]
    kept = [(x, ci) for x, ci in kept if len(x) >= MIN_SEEDS]
    cells = [x for x, _ in kept]
    signs = {_sign(*ci) for _, ci in kept} - {0}
    k = len(cells)
    out: dict[str, Any] = {"k": k, "F": None, "df1": None, "df2": None, "p": None}
    if k < 2:
        out["disagree"] = False
        return out
    means = np.array([x.mean() for x in cells])
    n = np.array([len(x) for x in cells], float)
    var = np.array([x.var(ddof=1) for x in cells])
    if not np.any(var > 0):
        out["p"] = 0.0 if np.ptp(means) > 1e-9 else 1.0
        out["disagree"] = out["p"] < HETEROGENEITY_ALPHA or signs == {1, -1}
        return out
    var = np.where(var > 0, var, var[var > 0].mean())
    out.update(_welch_f(means, var / n, n - 1))
    out["disagree"] = out["p"] < HETEROGENEITY_ALPHA or signs == {1, -1}
    return out


def _sign(low: float | None, high: float | None) -> int:
    """+1 for an interval above 0, −1 below, 0 straddling it or absent."""
    if low is not None and low > 0:
        return 1
    if high is not None and high < 0:
        return -1
    return 0


def _pooled_effect(
    cells: Sequence[np.ndarray],
    first: str,
    second: str,
    *,
    level: float,
    no_cliffs: bool = False,
    rates: Sequence[Estimate] | None = None,
) -> dict[str, Any]:
    """The effect over cells, cells as the unit (see the module docstring): the mean of the
    means of the cells with at least MIN_SEEDS pairs, and its interval — unless those cells
    disagree (`heterogeneity`): then no interval and the verdict "cells disagree: see each
    cell". `n_cells` counted of `n_cells_present`; `no_cliffs`: no run of any cell had one.
    `rates` (a cliff rate: each cell's Newcombe `Estimate`, aligned with `cells`): the pooled
    interval combines the cells' own (MOVER), so it stays inside [−1, 1]."""
    ests = list(rates) if rates is not None else [None] * len(cells)
    present = [(x, e) for x, e in zip(cells, ests, strict=True) if len(x)]
    counted = [(x, e) for x, e in present if len(x) >= MIN_SEEDS]
    intervals = [(e.low, e.high) for _, e in counted] if rates is not None else None
    present = [x for x, _ in present]
    out: dict[str, Any] = {
        "n": int(sum(len(x) for x, _ in counted)),
        "n_cells": len(counted),
        "n_cells_present": len(present),
        # With no cell of MIN_SEEDS pairs, the mean of what there is, with no interval and the
        # verdict "not enough data"; else only the counted cells make the figure.
        "mean": float(np.mean([x.mean() for x in present])) if present else None,
        "sd": None,
        "low": None,
        "high": None,
        "heterogeneity": heterogeneity([x for x, _ in counted], intervals),
        "method": "t" if rates is None else "mover",
    }
    if counted and rates is not None:
        ci = combine([(1 / len(counted), e) for _, e in counted])
        out.update(mean=ci.mean, low=ci.low, high=ci.high)
    elif counted:
        ci = contrast_ci([(1 / len(counted), x) for x, _ in counted], level=level)
        out.update(mean=ci.mean, low=ci.low, high=ci.high, se=ci.se, df=ci.df)
    out["decision"], out["verdict"] = decide(out["low"], out["high"], first, second)
    if not counted:
        out["verdict"] = f"not enough data: no cell has {MIN_SEEDS} seeds"
    elif no_cliffs:
        out.update(low=None, high=None, decision="no_cliffs", verdict=NO_CLIFFS)
    elif out["heterogeneity"]["disagree"]:
        out.update(low=None, high=None, decision="disagree", verdict=DISAGREE)
    elif len(counted) < len(present):
        out["verdict"] += f" (from {len(counted)} of {len(present)} cells with {MIN_SEEDS}+ seeds)"
    out["n_needed"] = out["more_needed"] = None  # planned per cell
    return out


# --- per cell ----------------------------------------------------------------------------------


def _seed_order(seed: Any) -> tuple:
    """Seeds sort as numbers when they are numbers (10 after 9), whatever their types."""
    return (str(type(seed)), seed)


def _cell_key(run: Mapping[str, Any], axes: Sequence[str]) -> tuple:
    cell = run.get("cell") or {}
    return tuple(cell.get(a) for a in axes)


def cell_stats(
    runs: Iterable[Mapping[str, Any]],
    *,
    metrics: Sequence[str] = METRICS,
    axes: Sequence[str] = CELL_AXES,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> list[dict[str, Any]]:
    """One row per matrix cell, in order of each cell's first run: the axes, `n_seeds`,
    `seeds`, and per metric `t_mean_ci` of its values over the cell's seeds (no interval
    from fewer than MIN_SEEDS). `n_boot` and `seed` are accepted and unused (no resampling)."""
    _check(level, n_boot)
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault(_cell_key(run, axes), []).append(run)
    rows = []
    for key, members in groups.items():
        row: dict[str, Any] = dict(zip(axes, key, strict=True))
        row["n_seeds"] = len(members)
        row["seeds"] = sorted(
            (m.get("seed") for m in members if m.get("seed") is not None), key=_seed_order
        )
        values = [run_metrics(m.get("summary")) for m in members]
        for name in metrics:
            row[name] = t_mean_ci([v[name] for v in values], level=level)
        rows.append(row)
    return rows


# --- the paired effect of one axis -------------------------------------------------------------


def paired_effect(
    runs: Iterable[Mapping[str, Any]],
    *,
    factor: str = "sharing",
    first: str = SHARED,
    second: str = PER_ROLE,
    metrics: Sequence[str] = ("peak", "final", "cliff"),
    axes: Sequence[str] = CELL_AXES,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """The paired effect `second − first` of one axis (default per_role − shared).

    Runs are paired when every other axis and the seed agree; a run without a partner is
    counted in `unpaired` and left out. Per metric, an effect is `{"n" (pairs), "mean", "sd"
    (of the differences), "low", "high" (bootstrap interval), "decision", "verdict",
    "n_needed" (seeds_needed), "more_needed" (n_needed − n, at least 0)}`.

    Returns `{"factor", "first", "second", "metrics", "overall": {metric: effect},
    "cells": [{<other axes>, "n_pairs", "seeds", metric: effect}], "unpaired"}`; cells in
    order of first appearance. A cell's interval is the t-interval of its differences (at
    least MIN_SEEDS pairs); `overall` treats cells as cells (`_pooled_effect`: "n_cells",
    "se", "df" added). Raises ValueError when `factor` is not an axis, or two runs claim the
    same place (same axes, level and seed). `n_boot` and `seed` are accepted and unused.
    """
    _check(level, n_boot)
    if factor not in axes:
        raise ValueError(f"factor {factor!r} is not one of the axes {', '.join(axes)}")
    others = [a for a in axes if a != factor]
    places = _places(runs, factor, first, second, others)
    cells, n_unpaired = _paired_cells(places, first, second, metrics)
    rows = [
        _paired_row(dict(zip(others, key, strict=True)), cell, metrics, first, second, level)
        for key, cell in cells.items()
    ]
    overall = {
        m: _pooled_effect(
            [np.array(c["diffs"][m], dtype=float) for c in cells.values()],
            first,
            second,
            level=level,
            no_cliffs=m == "cliff" and not any(c["cliffs"] for c in cells.values()),
            rates=[_cell_rate(c["pairs"][m], level) for c in cells.values()]
            if m in RATES
            else None,
        )
        for m in metrics
    }
    return {
        "factor": factor,
        "first": first,
        "second": second,
        "metrics": list(metrics),
        "overall": overall,
        "cells": rows,
        "unpaired": n_unpaired,
    }


def _places(
    runs: Iterable[Mapping[str, Any]], factor: str, first: str, second: str, others: Sequence[str]
) -> dict[tuple, dict[str, dict]]:
    """{(other axes…, seed): {level of `factor`: run_metrics}} for the runs at `first` or
    `second`; raises ValueError when two runs claim one place."""
    places: dict[tuple, dict[str, dict]] = {}
    for run in runs:
        cell = run.get("cell") or {}
        level_value = cell.get(factor)
        if level_value not in (first, second):
            continue
        key = (*(cell.get(a) for a in others), run.get("seed"))
        slot = places.setdefault(key, {})
        if level_value in slot:
            where = ", ".join(f"{a}={v}" for a, v in zip([*others, "seed"], key, strict=True))
            raise ValueError(f"two runs with {factor}={level_value} at {where}")
        slot[level_value] = run_metrics(run.get("summary"))
    return places


def _cell_rate(pairs: Sequence[tuple[float, float]], level: float) -> Estimate:
    """A cell's paired difference of rates, as `_rate_effect` reports it."""
    return paired_difference([a for a, _ in pairs], [b for _, b in pairs], level)


def _paired_cells(
    places: Mapping[tuple, Mapping[str, Mapping]], first: str, second: str, metrics: Sequence[str]
) -> tuple[dict[tuple, dict[str, Any]], int]:
    """({other axes: {"seeds", "diffs": {metric: [second − first per pair]}, "cliffs" (runs
    of the cell's pairs with a cliff)}}, the number of places without a partner)."""
    cells: dict[tuple, dict[str, Any]] = {}
    n_unpaired = 0
    for key, slot in places.items():
        if len(slot) < 2:
            n_unpaired += 1
            continue
        cell = cells.setdefault(
            key[:-1],
            {"seeds": [], "diffs": {m: [] for m in metrics}, "pairs": {m: [] for m in metrics}},
        )
        cell.setdefault("cliffs", 0)
        cell["seeds"].append(key[-1])
        for m in metrics:
            a, b = slot[first].get(m), slot[second].get(m)
            if a is not None and b is not None:
                cell["diffs"][m].append(b - a)
                cell["pairs"][m].append((a, b))
                if m == "cliff":
                    cell["cliffs"] += int(a > 0) + int(b > 0)
    return cells, n_unpaired


def _paired_row(
    row: dict[str, Any],
    cell: Mapping[str, Any],
    metrics: Sequence[str],
    first: str,
    second: str,
    level: float,
) -> dict[str, Any]:
    """One cell's row: its other axes (`row`), pairs, seeds and each metric's effect."""
    row["n_pairs"] = len(cell["seeds"])
    row["seeds"] = sorted((s for s in cell["seeds"] if s is not None), key=_seed_order)
    for m in metrics:
        if m in RATES:
            row[m] = _rate_effect(cell["pairs"][m], first, second, level=level)
        else:
            row[m] = _effect(np.array(cell["diffs"][m]), first, second, level=level)
        if m == "cliff" and not cell["cliffs"] and row[m]["n"] >= MIN_SEEDS:
            # Not a single cliff under either mode: "no cliffs", not [+0.000, +0.000].
            row[m].update(low=None, high=None, decision="no_cliffs", verdict=NO_CLIFFS)
            row[m].update(n_needed=None, more_needed=None)
    return row


# --- main effects --------------------------------------------------------------------------------


def main_effects(
    runs: Iterable[Mapping[str, Any]],
    *,
    metrics: Sequence[str] = ("peak", "final", "cliff"),
    axes: Sequence[str] = CELL_AXES,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """Main effect of every axis with at least two levels, cells as the unit: a level's
    mean is the unweighted mean of its cells' means (a cell: every axis fixed; its seeds the
    replicates), its effect that minus the unweighted mean of the level means. The interval
    is `contrast_ci` of that contrast of cell means, so it exists only where seeds repeat:
    every cell of the axis's levels has at least MIN_SEEDS seeds.

    Returns `{axis: {metric: [{"level", "n" (runs), "n_cells", "mean", "effect", "low",
    "high", "decision" ("above", "below", "undecided", "insufficient"), "verdict"}]}}`,
    levels in order of first appearance. `n_boot` and `seed` are accepted and unused.
    """
    runs = list(runs)
    values = [run_metrics(r.get("summary")) for r in runs]
    out: dict[str, Any] = {}
    for axis in axes:
        levels: dict[Any, dict[tuple, list[int]]] = {}
        for i, run in enumerate(runs):
            lv = (run.get("cell") or {}).get(axis)
            levels.setdefault(lv, {}).setdefault(_cell_key(run, axes), []).append(i)
        if len(levels) < 2:
            continue
        out[axis] = {}
        at = list(axes).index(axis)
        for m in metrics:
            strata: dict[Any, dict[tuple, np.ndarray]] = {}
            for lv, by_cell in levels.items():
                for key, idx in by_cell.items():
                    if len(x := _finite(values[i][m] for i in idx)):
                        strata.setdefault(lv, {})[key[:at] + key[at + 1 :]] = x
            cells = {lv: list(strata.get(lv, {}).values()) for lv in levels}
            rows = [_level_row(axis, lv, m, cells, level) for lv in levels]
            split = _strata_disagree(strata, m, level)
            for row in rows:
                if split["disagree"] and row["decision"] != "no_cliffs":
                    row.update(low=None, high=None, decision="disagree", verdict=DISAGREE)
                row["heterogeneity"] = split
            out[axis][m] = rows
    return out


def _strata_disagree(
    strata: Mapping[Any, Mapping[tuple, np.ndarray]], m: str, level: float
) -> dict[str, Any]:
    """Do the other axes' cells (strata) disagree on an axis's effect? The heterogeneity
    guard of the paired effect, for main effects: in every stratum where each level has
    MIN_SEEDS values, the first level's effect against the average of the levels, with its
    SE and df; Welch's test of equal means over the strata at HETEROGENEITY_ALPHA (as
    `heterogeneity`), and two strata decided in opposite directions always disagree.
    `{"k" (strata), "F", "df1", "df2", "p", "disagree"}`.

    One level's effect decides them all: with L levels, the effects of the others are the
    same contrasts taken from the other side, and a main effect pools over the strata
    exactly as the paired effect pools over cells."""
    levels = list(strata)
    shared = set.intersection(*(set(by.keys()) for by in strata.values())) if strata else set()
    rows = []
    for key in sorted(shared, key=str):
        xs = [strata[lv][key] for lv in levels]
        if any(len(x) < MIN_SEEDS for x in xs):
            continue
        weights = [(1 if i == 0 else 0) - 1 / len(levels) for i in range(len(levels))]
        if m in RATES:
            est = combine([(w, rate(x.tolist(), level)) for w, x in zip(weights, xs, strict=True)])
            z = normal_quantile((1 + level) / 2)  # the SE a Wald interval of this width has
            df = min(len(x) for x in xs) - 1
            rows.append((est.mean, (est.high - est.low) / (2 * z), df, est.low, est.high))
        else:
            ci = contrast_ci(list(zip(weights, xs, strict=True)), level=level)
            rows.append((ci.mean, ci.se, ci.df, ci.low, ci.high))
    out: dict[str, Any] = {"k": len(rows), "F": None, "df1": None, "df2": None, "p": None}
    out["disagree"] = False
    if len(rows) < 2:
        return out
    est = np.array([r[0] for r in rows])
    var = np.array([r[1] ** 2 for r in rows])
    df = np.array([r[2] for r in rows], float)
    signs = {_sign(r[3], r[4]) for r in rows} - {0}
    if not np.any(var > 0):
        out["p"] = 0.0 if np.ptp(est) > 1e-9 else 1.0
    else:
        var = np.where(var > 0, var, var[var > 0].mean())
        out.update(_welch_f(est, var, df))
    out["disagree"] = out["p"] < HETEROGENEITY_ALPHA or signs == {1, -1}
    return out


def _welch_f(means: np.ndarray, var: np.ndarray, df: np.ndarray) -> dict[str, float]:
    """Welch's test of equal means from k estimates with their squared SEs (`var`) and the
    df behind each: `{"F", "df1", "df2", "p"}`. Unlike Cochran's χ² it allows for SEs that
    are themselves estimated from few seeds (with Q alone, equal strata were said to
    disagree 8.7% of the time at α 0.05, measured)."""
    k = len(means)
    w = 1 / var
    grand = float(np.sum(w * means) / np.sum(w))
    a = float(np.sum(w * (means - grand) ** 2)) / (k - 1)
    tmp = float(np.sum((1 - w / np.sum(w)) ** 2 / df))
    f = a / (1 + 2 * (k - 2) / (k * k - 1) * tmp)
    df2 = (k * k - 1) / (3 * tmp)
    return {"F": f, "df1": k - 1, "df2": df2, "p": f_sf(f, k - 1, df2)}


def _level_row(
    axis: str, lv: Any, m: str, cells: Mapping[Any, list[np.ndarray]], level: float
) -> dict[str, Any]:
    """One level's row of `main_effects` for metric `m`; `cells`: {level: its cells'
    finite values of `m`}."""
    xs = cells[lv]
    present = [other for other, found in cells.items() if found]
    row: dict[str, Any] = {
        "level": lv,
        "n": int(sum(len(x) for x in xs)),
        "n_cells": len(xs),
        "mean": float(np.mean([x.mean() for x in xs])) if xs else None,
        "effect": None,
        "low": None,
        "high": None,
    }
    if xs and len(present) >= 2:
        # Weights on cell means: this level's cells 1/k − 1/(L·k), others −1/(L·k').
        parts = [
            (
                (1 if other == lv else 0) / len(cells[other])
                - 1 / (len(present) * len(cells[other])),
                x,
            )
            for other in present
            for x in cells[other]
        ]
        if m in RATES:
            # A contrast of cliff rates: the cells' Wilson intervals combined (MOVER), so it
            # stays inside [−1, 1]; like the t-interval, only where every cell repeats seeds.
            ci = combine([(w, rate(x.tolist(), level)) for w, x in parts])
            if not all(len(x) >= MIN_SEEDS for _, x in parts):
                ci = Estimate(mean=ci.mean, n=ci.n, method=ci.method)
        else:
            ci = contrast_ci(parts, level=level)
        row.update(effect=ci.mean, low=ci.low, high=ci.high)
    decision, _ = decide(row["low"], row["high"], "", "")
    row["decision"] = {"second_higher": "above", "first_higher": "below"}.get(decision, decision)
    if m == "cliff" and xs and not any(np.any(x > 0) for c in cells.values() for x in c):
        # Not one cliff on this axis: "no cliffs", not the interval [0, 0].
        row.update(low=None, high=None, decision="no_cliffs")
    row["verdict"] = {
        "above": f"{lv} above the average of {axis}",
        "below": f"{lv} below the average of {axis}",
        "undecided": "undecided: interval straddles 0",
        "insufficient": f"not enough data: a cell with fewer than {MIN_SEEDS} seeds",
        "no_cliffs": NO_CLIFFS,
    }[row["decision"]]
    return row


# --- the reviewer's test ----------------------------------------------------------------------


def lead_test(
    runs: Iterable[Mapping[str, Any]],
    *,
    n_perm: int = N_PERM,
    seed: int = SEED,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Does amplification precede the cliff more often than chance?

    Each run is `{"cliff_onset", "onset", "steps"}`: its cliff onset, its amplification onset
    (see `lead_inputs`) and the logged steps where an onset could have been found (the
    role's `grad_norm` steps). Only runs with both onsets and at least one step count
    (`n`); `lead` = cliff_onset − onset.

    Statistics: the fraction of runs with lead > 0 and the mean lead. Null hypothesis: each
    run's onset falls uniformly at random on one of its logged steps, independently of the
    cliff. `n_perm` (10,000) random placements, seeded, give one-sided p-values
    (1 + #{null ≥ observed}) / (1 + n_perm) for both statistics; `p_fraction_exact` is the
    same p-value for the fraction computed exactly (the null count of leads > 0 is a sum of
    independent Bernoullis, one per run, with the run's share of steps before its cliff).

    Returns `{"n", "n_precede" (lead > 0), "n_same" (lead 0), "fraction", "null_fraction"
    (expected under the null), "mean_lead", "null_mean_lead", "leads" (sorted), "lead_median",
    "lead_q1", "lead_q3", "lead_min", "lead_max", "p_fraction", "p_fraction_exact",
    "p_mean_lead", "n_perm", "decision" ("precedes", "not_shown", "insufficient"), "verdict"}`.
    The decision uses the exact p-value of the fraction: "precedes" when it is below `alpha`.
    Quartiles are numpy's linear-interpolation quantiles of the leads.
    """
    if int(n_perm) != n_perm or n_perm < 100:
        raise ValueError(f"n_perm must be a whole number of at least 100, not {n_perm}")
    cliffs, onsets, grids = _lead_runs(runs)
    n = len(cliffs)
    out: dict[str, Any] = {"n": n, "n_perm": int(n_perm)}
    keys = ("n_precede", "n_same", "fraction", "null_fraction", "mean_lead", "null_mean_lead")
    keys += ("lead_median", "lead_q1", "lead_q3", "lead_min", "lead_max")
    out.update({k: None for k in keys})
    out.update(leads=[], p_fraction=None, p_fraction_exact=None, p_mean_lead=None)
    if n == 0:
        out["decision"] = "insufficient"
        out["verdict"] = "no run has both a cliff and an amplification onset"
        return out
    out.update(_lead_statistics(np.array(cliffs), np.array(onsets), grids, n_perm, seed))
    k, p = out["n_precede"], out["p_fraction_exact"]
    said = (
        f"amplification preceded the cliff in {k} of {n} runs; onsets at random steps would "
        f"in {out['null_fraction']:.0%} (p = {p:.2g})"
    )
    if p < alpha:
        out["decision"], out["verdict"] = "precedes", said + ": more often than chance"
    else:
        out["decision"], out["verdict"] = "not_shown", said + ": not distinguishable from chance"
    return out


def _lead_runs(runs: Iterable[Mapping[str, Any]]) -> tuple[list, list, list[np.ndarray]]:
    """(cliff onsets, amplification onsets, logged steps) of the runs with both onsets and
    at least one step."""
    cliffs, onsets, grids = [], [], []
    for run in runs:
        cliff, onset = as_number(run.get("cliff_onset")), as_number(run.get("onset"))
        steps = np.unique(_finite(run.get("steps") or ()))
        if cliff is None or onset is None or not len(steps):
            continue
        cliffs.append(cliff)
        onsets.append(onset)
        grids.append(steps)
    return cliffs, onsets, grids


def _lead_statistics(
    cliff: np.ndarray, onsets: np.ndarray, grids: Sequence[np.ndarray], n_perm: int, seed: int
) -> dict[str, Any]:
    """The observed leads' statistics, their null expectations and p-values (`lead_test`'s
    fields from `n_precede` to `p_mean_lead`)."""
    n = len(cliff)
    lead = cliff - onsets
    frac = float(np.mean(lead > 0))
    q1, median, q3 = np.quantile(lead, [0.25, 0.5, 0.75])
    # Per run: the chance that a random onset lies strictly before the cliff, and the mean lead
    # of a random onset.
    p_before = np.array([np.mean(g < c) for g, c in zip(grids, cliff, strict=True)])
    null_lead = np.array([np.mean(c - g) for g, c in zip(grids, cliff, strict=True)])
    rng = np.random.default_rng(seed)
    null_frac = np.zeros(n_perm)
    null_mean = np.zeros(n_perm)
    for g, c in zip(grids, cliff, strict=True):
        placed = g[rng.integers(0, len(g), size=n_perm)]
        null_frac += placed < c
        null_mean += c - placed
    null_frac /= n
    null_mean /= n
    k = int(np.count_nonzero(lead > 0))
    return {
        "n_precede": k,
        "n_same": int(np.count_nonzero(lead == 0)),
        "fraction": frac,
        "null_fraction": float(p_before.mean()),
        "mean_lead": float(lead.mean()),
        "null_mean_lead": float(null_lead.mean()),
        "leads": [as_step(x) for x in np.sort(lead)],
        "lead_median": float(median),
        "lead_q1": float(q1),
        "lead_q3": float(q3),
        "lead_min": as_step(lead.min()),
        "lead_max": as_step(lead.max()),
        "p_fraction": (1 + int(np.count_nonzero(null_frac >= frac - 1e-12))) / (1 + n_perm),
        "p_fraction_exact": _poisson_binomial_tail(p_before, k),
        "p_mean_lead": (1 + int(np.count_nonzero(null_mean >= lead.mean() - 1e-9))) / (1 + n_perm),
    }


def _poisson_binomial_tail(p: np.ndarray, k: int) -> float:
    """P(K ≥ k) for K a sum of independent Bernoulli(p_i), by dynamic programming."""
    dist = np.zeros(len(p) + 1)
    dist[0] = 1.0
    for q in p:
        dist[1:] = dist[1:] * (1 - q) + dist[:-1] * q
        dist[0] *= 1 - q
    return float(min(1.0, dist[k:].sum()))


def lead_inputs(
    series: Mapping[str, tuple[Sequence, Sequence]],
    summary: Mapping[str, Any],
    role: str | None = None,
) -> dict[str, Any]:
    """One run's entry for `lead_test`, from its series and `summarize_run(series)`.

    `role` None takes the role whose amplification came first (ties: the first by name);
    `steps` are that role's logged `grad_norm` steps. `{"cliff_onset", "onset", "role",
    "steps"}`, onsets None when absent."""
    read = RunSummary.of(summary)
    onsets = {r: s for r, s in read.amplification.items() if s is not None}
    if role is None and onsets:
        role = min(sorted(onsets), key=lambda r: onsets[r])
    steps: list = []
    if role is not None and role_key(role, GRAD_NORM) in series:
        st, va = series[role_key(role, GRAD_NORM)]
        steps = [as_step(s) for s, v in zip(st, va, strict=True) if as_number(v) is not None]
    return {
        "cliff_onset": read.accuracy.cliff_onset,
        "onset": onsets.get(role) if role is not None else None,
        "role": role,
        "steps": sorted(set(steps)),
    }
