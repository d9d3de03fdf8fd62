"""Key results of runs and matrix cells: `analysis` on the runs' stored series.

The experiment and run pages, the Dash panel and `python -m trainer analyze` all draw their
conclusions from `analysis` (docs/design.md §6); this module is the one place the web
process feeds it from the database, so a gain, a peak or a cliff reads the same on every page.

- `run_summaries(runs)` → `{run_id: summarize_run(...)}` on each run's full, undownsampled
  series (downsampling would move peaks and onsets): `eval/accuracy`, `role/<r>/grad_norm`,
  `role/<r>/grad_share` and `policy/<p>/grad_norm`. `gradients=False` reads `eval/accuracy`
  alone — all the matrix needs, and a fraction of the rows.
- `cell_summaries(experiment)` → `summarize_cells`' `CellSummary`s (one per workflow × task ×
  model × sharing cell, across seeds), each with the ids of its runs in `runs`.

Reads are batched — one aggregate query and one data query for all the runs, however many —
and summaries are cached in the process per (run, what was read): a run is summarised again
only when the count, last step or sum of its summarised points, or its running state, changes.
So a page that refreshes every few seconds while one run of a thousand trains re-reads one run.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from analysis.cells import CellSummary, summarize_cells
from analysis.runs import summarize_run
from vocabulary.names import (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    CELL_AXES,
    GRAD_NORM,
    GRAD_SHARE,
    MATRIX_AXES,
    policy_key,
    role_key,
)
from webapp.experiments.models import Experiment, Run
from webapp.metrics import matching_series, signatures
from webapp.runs.lifecycle import live_runs
from webapp.runs.seeds import seeds_only

LIVE_STATUSES = Run.ACTIVE  # queued or running: verdicts are provisional, views refresh

# The series `summarize_run` reads (docs/design.md §5 names), as SQL LIKE patterns.
_GRADIENT_PATTERNS = (
    role_key("%", GRAD_NORM),
    role_key("%", GRAD_SHARE),
    policy_key("%", GRAD_NORM),
)
_CACHE_SIZE = 20_000

_cache: OrderedDict[tuple[int, bool], tuple[tuple, dict]] = OrderedDict()
_cache_lock = threading.Lock()


def run_summaries(runs: Iterable[Run], *, gradients: bool = True) -> dict[int, dict[str, Any]]:
    """`{run.id: analysis.runs.summarize_run(series, running=…, sharing=run.sharing)}`.

    `running` is True for queued and running runs, so an unfinished run gets a provisional
    verdict rather than a final one. Runs with no points get the all-None summary.
    """
    runs = list(runs)
    if not runs:
        return {}
    signatures = _signatures([run.id for run in runs], gradients)
    out: dict[int, dict[str, Any]] = {}
    stale: list[Run] = []
    with _cache_lock:
        for run in runs:
            signature = (
                run.status in LIVE_STATUSES,
                run.sharing,
                run.total_steps,
                signatures.get(run.id),
            )
            hit = _cache.get((run.id, gradients))
            if hit is not None and hit[0] == signature:
                _cache.move_to_end((run.id, gradients))
                out[run.id] = hit[1]
            else:
                stale.append(run)
    if stale:
        series = _read([run.id for run in stale], gradients)
        fresh = {}
        for run in stale:
            running = run.status in LIVE_STATUSES
            fresh[run.id] = summarize_run(
                series.get(run.id, {}),
                running=running,
                sharing=run.sharing or None,
                # The radar's amplification baseline: one rule on every page.
                total_steps=run.total_steps or None,
            )
            signature = (running, run.sharing, run.total_steps, signatures.get(run.id))
            with _cache_lock:
                _cache[(run.id, gradients)] = (signature, fresh[run.id])
                _cache.move_to_end((run.id, gradients))
                while len(_cache) > _CACHE_SIZE:
                    _cache.popitem(last=False)
        out.update(fresh)
    return {run.id: out[run.id] for run in runs}


def cell_summaries(experiment: Experiment, *, gradients: bool = True) -> list[CellSummary]:
    """`analysis.cells.summarize_cells` for the experiment's root runs, each cell with
    `runs`: the ids of its runs in seed order (for links to the panel's compare view).
    Branches are not seeds (DESIGN §6): they continue a parent's seed with a change; nor are
    failed or cancelled runs (`webapp/runs/seeds.py`, the statistics page's rule)."""
    roots = experiment.runs.filter(parent__isnull=True, branch_step__isnull=True)
    runs = list(
        seeds_only(live_runs(roots))
        .only(
            "id",
            *MATRIX_AXES,
            "status",
            "total_steps",
            "experiment_id",
        )
        .order_by("seed", "id")
    )
    return summarize_experiment_cells(runs, run_summaries(runs, gradients=gradients))


def summarize_experiment_cells(
    runs: Sequence[Run], summaries: dict[int, dict[str, Any]]
) -> list[CellSummary]:
    """`summarize_cells` over runs whose summaries are already known, plus `runs` per row."""
    rows = summarize_cells(
        {
            "cell": {axis: getattr(run, axis) for axis in CELL_AXES},
            "seed": run.seed,
            "summary": summaries.get(run.id),
        }
        for run in runs
    )
    ids: dict[tuple, list[int]] = {}
    for run in runs:
        ids.setdefault((run.workflow, run.task, run.model, run.sharing), []).append(run.id)
    return [
        dataclasses.replace(row, runs=ids[(row.workflow, row.task, row.model, row.sharing)])
        for row in rows
    ]


def clear_cache() -> None:
    """Forget every cached summary (tests; a process that rewrote history)."""
    with _cache_lock:
        _cache.clear()


# --- queries -----------------------------------------------------------------------------------


def _keys(gradients: bool) -> tuple[list[str], tuple[str, ...]]:
    """The keys and LIKE patterns of the series `summarize_run` reads."""
    # The SE feeds the cliff's noise test (docs/analysis.md): read with the accuracy.
    return [ACCURACY_KEY, ACCURACY_SE_KEY], _GRADIENT_PATTERNS if gradients else ()


def _signatures(run_ids: list[int], gradients: bool) -> dict[int, tuple]:
    """Per run, (count, last step, sum of values) of the points a summary reads."""
    return signatures(run_ids, *_keys(gradients))


def _read(run_ids: list[int], gradients: bool) -> dict[int, dict[str, tuple[list, list]]]:
    """`{run_id: {key: (steps, values)}}`, every point (no downsampling)."""
    return matching_series(run_ids, *_keys(gradients))
