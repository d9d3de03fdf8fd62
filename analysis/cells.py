"""Across the seeds of one matrix cell (`summarize_cells`; root runs only: branches are not
seeds): means with Student-t 95% intervals of gain and final_gain, and the fraction of seeds
with a cliff; fewer than `MIN_SEEDS` (3) seeds get no interval and no verdict.

A cell's summary is a `CellSummary`, read by attribute (`cell.gain.mean`, `cell.base`,
`cell.n_cliffs`); `as_dict()` gives the plain dict that `python -m trainer analyze --json`
prints and the panel's CSV takes its columns from (`gain_mean`, `gain_low`, …, the same keys
in the same order as ever).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from analysis.cliffs import UNJUDGED
from analysis.intervals import Estimate, mean_ci
from analysis.runs import AccuracySummary, RunSummary
from vocabulary.names import CELL_AXES, SHARED

# Seeds are the replication unit: fewer than this in a cell give no interval and no verdict.
MIN_SEEDS = 3


@dataclass(frozen=True)
class CellSummary:
    """One matrix cell across its seeds (`summarize_cells` says what each field is)."""

    workflow: Any
    task: Any
    model: Any
    sharing: Any
    n_seeds: int
    seeds: list
    gain: Estimate
    final_gain: Estimate
    base: float | None
    peak: float | None
    final: float | None
    n_cliffs: int
    n_provisional: int
    n_judged: int
    n_degraded: int  # judged seeds with no learned peak that fell below their base
    cliff_fraction: float | None
    capture: str | None
    capture_counts: dict[str, int]
    lead_mean: dict[str, float | None]
    # The ids of the cell's runs in seed order, where the caller knows them (the web app's
    # `cell_summaries`); not part of `as_dict`.
    runs: list[int] = field(default_factory=list)

    @property
    def cliffs_text(self) -> str:
        """The cell's cliff column, in the same words on every page: cliffs of the judged
        seeds ("1/3"), then the seeds that fell below their base with no learned peak to fall
        from ("0/3 · 1 degraded": not a cliff, but not a healthy cell either); "—" when no
        seed has a verdict."""
        if not self.n_judged:
            return "—"
        text = f"{self.n_cliffs}/{self.n_judged}"
        return f"{text} · {self.n_degraded} degraded" if self.n_degraded else text

    def as_dict(self) -> dict[str, Any]:
        """The plain dict: the axes, then `<x>_mean`, `<x>_low`, `<x>_high`, `<x>_n` for
        gain and final_gain, `base_mean`, `peak_mean`, `final_mean` and the rest by name."""
        out: dict[str, Any] = {axis: getattr(self, axis) for axis in CELL_AXES}
        out.update(n_seeds=self.n_seeds, seeds=self.seeds)
        for name in ("gain", "final_gain"):
            estimate = getattr(self, name)
            for part in ("mean", "low", "high", "n"):
                out[f"{name}_{part}"] = getattr(estimate, part)
        for name in ("base", "peak", "final"):
            out[f"{name}_mean"] = getattr(self, name)
        for name in ("n_cliffs", "n_provisional", "n_judged", "cliff_fraction", "capture"):
            out[name] = getattr(self, name)
        out.update(capture_counts=self.capture_counts, lead_mean=self.lead_mean)
        out.update(n_degraded=self.n_degraded)  # added last: the older keys keep their order
        return out


def summarize_cells(runs: Iterable[Mapping[str, Any]], level: float = 0.95) -> list[CellSummary]:
    """One `CellSummary` per matrix cell from `{"cell": {workflow, task, model, sharing},
    "seed", "summary": summarize_run(...)}` dicts, in order of each cell's first run.

    Fields: the four axes; `n_seeds`, `seeds`; `gain` and `final_gain` as `Estimate`s
    (`mean_ci`; no interval from fewer than MIN_SEEDS (3) seeds); the means `base`, `peak`,
    `final`; `n_cliffs`, `n_provisional`, `n_judged` (seeds with a verdict, i.e. not
    "insufficient"), `n_degraded` (judged seeds whose verdict is "degradation") and
    `cliff_fraction` = n_cliffs / n_judged (None when 0; provisional cliffs count as
    cliffs); for shared cells `capture` (the most common capturing role, None when no seed
    was captured or on a tie) and `capture_counts` {role: seeds}; `lead_mean` {role: mean
    lead over seeds that have one, or None}. Runs without an evaluation contribute to
    n_seeds only.
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for run in runs:
        cell = run.get("cell") or {}
        groups.setdefault(tuple(cell.get(a) for a in CELL_AXES), []).append(run)
    return [_cell(key, members, level) for key, members in groups.items()]


def _cell(key: tuple, members: list[Mapping[str, Any]], level: float) -> CellSummary:
    summaries = [RunSummary.of(m.get("summary")) for m in members]
    accs = [s.accuracy for s in summaries]
    seeds = [m.get("seed") for m in members]
    statuses = [a.cliff_status for a in accs]
    judged = [st for st in statuses if st not in UNJUDGED]
    n_cliffs = sum(st in ("cliff", "provisional") for st in judged)
    capture, capture_counts = None, {}
    if key[CELL_AXES.index("sharing")] == SHARED:
        counts = Counter(s.capture for s in summaries if s.capture is not None)
        top = counts.most_common(2)
        tie = len(top) > 1 and top[0][1] == top[1][1]
        capture = top[0][0] if top and not tie else None
        capture_counts = dict(sorted(counts.items()))
    leads: dict[str, list] = {}
    for s in summaries:
        for role, value in s.lead.items():
            leads.setdefault(role, []).append(value)
    return CellSummary(
        **dict(zip(CELL_AXES, key, strict=True)),
        n_seeds=len(members),
        seeds=sorted((s for s in seeds if s is not None), key=lambda x: (str(type(x)), x)),
        gain=_estimate(accs, "gain", level),
        final_gain=_estimate(accs, "final_gain", level),
        base=mean_ci([a.base for a in accs], level).mean,
        peak=mean_ci([a.peak for a in accs], level).mean,
        final=mean_ci([a.final for a in accs], level).mean,
        n_cliffs=n_cliffs,
        n_provisional=sum(st == "provisional" for st in judged),
        n_judged=len(judged),
        n_degraded=sum(st == "degradation" for st in judged),
        cliff_fraction=n_cliffs / len(judged) if judged else None,
        capture=capture,
        capture_counts=capture_counts,
        lead_mean={role: mean_ci(vals).mean for role, vals in sorted(leads.items())},
    )


def _estimate(accs: list[AccuracySummary], name: str, level: float) -> Estimate:
    """A cell's mean of `name` over its seeds, with no interval from fewer than MIN_SEEDS."""
    ci = mean_ci([getattr(a, name) for a in accs], level)
    if ci.n < MIN_SEEDS:
        return Estimate(mean=ci.mean, n=ci.n)
    return Estimate(mean=ci.mean, low=ci.low, high=ci.high, n=ci.n)
