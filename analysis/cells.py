"""Across the seeds of one matrix cell (`summarize_cells`; root runs only: branches are not
seeds): means with Student-t 95% intervals of gain and final_gain, and the fraction of seeds
with a cliff; fewer than `MIN_SEEDS` (3) seeds get no interval and no verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from analysis.cliffs import UNJUDGED
from analysis.intervals import mean_ci
from analysis.runs import RunSummary
from vocabulary.names import CELL_AXES

# Seeds are the replication unit: fewer than this in a cell give no interval and no verdict.
MIN_SEEDS = 3


def summarize_cells(runs: Iterable[Mapping[str, Any]], level: float = 0.95) -> list[dict]:
    """One row per matrix cell from `{"cell": {workflow, task, model, sharing}, "seed",
    "summary": summarize_run(...)}` dicts, in order of each cell's first run.

    Row keys: the four axes; `n_seeds`, `seeds`; for gain and final_gain `<x>_mean`,
    `<x>_low`, `<x>_high` (`mean_ci`; none from fewer than MIN_SEEDS (3) seeds) and `<x>_n`;
    `base_mean`,
    `peak_mean`, `final_mean`; `n_cliffs`, `n_provisional`, `n_judged` (seeds with a verdict,
    i.e. not "insufficient") and `cliff_fraction` = n_cliffs / n_judged (None when 0;
    provisional cliffs count as cliffs); for shared cells `capture` (the most common capturing
    role, None when no seed was captured or on a tie) and `capture_counts` {role: seeds};
    `lead_mean` {role: mean lead over seeds that have one, or None}. Runs without an
    evaluation contribute to n_seeds only.
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for run in runs:
        cell = run.get("cell") or {}
        groups.setdefault(tuple(cell.get(a) for a in CELL_AXES), []).append(run)

    rows = []
    for key, members in groups.items():
        summaries = [RunSummary.of(m.get("summary")) for m in members]
        accs = [s.accuracy for s in summaries]
        row: dict[str, Any] = dict(zip(CELL_AXES, key, strict=True))
        seeds = [m.get("seed") for m in members]
        row["n_seeds"] = len(members)
        row["seeds"] = sorted((s for s in seeds if s is not None), key=lambda x: (str(type(x)), x))
        for name in ("gain", "final_gain"):
            ci = mean_ci([getattr(a, name) for a in accs], level)
            if ci["n"] < MIN_SEEDS:
                ci.update(low=None, high=None)
            row.update(
                {f"{name}_mean": ci["mean"], f"{name}_low": ci["low"], f"{name}_high": ci["high"]}
            )
            row[f"{name}_n"] = ci["n"]
        for name in ("base", "peak", "final"):
            row[f"{name}_mean"] = mean_ci([getattr(a, name) for a in accs], level)["mean"]
        statuses = [a.cliff_status for a in accs]
        judged = [st for st in statuses if st not in UNJUDGED]
        row["n_cliffs"] = sum(st in ("cliff", "provisional") for st in judged)
        row["n_provisional"] = sum(st == "provisional" for st in judged)
        row["n_judged"] = len(judged)
        row["cliff_fraction"] = row["n_cliffs"] / len(judged) if judged else None

        if key[CELL_AXES.index("sharing")] == "shared":
            counts = Counter(s.capture for s in summaries if s.capture is not None)
            top = counts.most_common(2)
            tie = len(top) > 1 and top[0][1] == top[1][1]
            row["capture"] = top[0][0] if top and not tie else None
            row["capture_counts"] = dict(sorted(counts.items()))
        else:
            row["capture"] = None
            row["capture_counts"] = {}

        leads: dict[str, list] = {}
        for s in summaries:
            for role, value in s.lead.items():
                leads.setdefault(role, []).append(value)
        row["lead_mean"] = {role: mean_ci(vals)["mean"] for role, vals in sorted(leads.items())}
        rows.append(row)
    return rows
