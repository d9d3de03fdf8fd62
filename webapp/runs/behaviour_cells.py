"""The experiment matrix coloured by a behaviour metric: per cell, the mean over its seeds of
each run's final or peak value of one `behav/…` series (trainer/behaviour.py).

`final` is a run's last logged value, `peak` its largest: the first says where the behaviour
ended, the second how far it went (voter agreement that touched 1 and came back). A run that
never logged the metric (a workflow without evaluator or voters) is left out of its cell's
mean, and a cell none of whose runs logged it has no value. One query for every run.
"""

from __future__ import annotations

from typing import Any

from vocabulary.names import BEHAVIOUR_KEYS, CELL_AXES
from webapp.experiments.models import Experiment
from webapp.metrics import read_runs_series
from webapp.runs.lifecycle import live_runs
from webapp.runs.seeds import seeds_only

AT = ("final", "peak")


def behaviour_cells(experiment: Experiment, key: str, at: str = "final") -> list[dict[str, Any]]:
    """One row per cell: the axes, `runs` (ids, seed order), `values` ({run id: value or None}),
    `mean` (over the runs that logged the metric, or None) and `n` (how many did). Raises
    ValueError naming a key that is not a behaviour metric or an `at` other than final/peak."""
    if key not in BEHAVIOUR_KEYS:
        raise ValueError(f"{key!r} is not a behaviour metric; one of {', '.join(BEHAVIOUR_KEYS)}")
    if at not in AT:
        raise ValueError(f"at must be final or peak, not {at!r}")
    # Seeds only, as the accuracy matrix: not branches, nor failed or cancelled runs (seeds.py).
    roots = experiment.runs.filter(parent__isnull=True, branch_step__isnull=True)
    runs = list(seeds_only(live_runs(roots)).only("id", "seed", *CELL_AXES).order_by("seed", "id"))
    series = read_runs_series([run.id for run in runs], [key])
    cells: dict[tuple, dict[str, Any]] = {}
    for run in runs:
        axes = tuple(getattr(run, axis) for axis in CELL_AXES)
        cell = cells.setdefault(axes, {**dict(zip(CELL_AXES, axes)), "runs": [], "values": {}})
        cell["runs"].append(run.id)
        cell["values"][run.id] = run_value(series[run.id].get(key), at)
    for cell in cells.values():
        logged = [v for v in cell["values"].values() if v is not None]
        cell["n"] = len(logged)
        cell["mean"] = sum(logged) / len(logged) if logged else None
    return list(cells.values())


def run_value(points: dict[str, list] | None, at: str) -> float | None:
    """A run's final (last logged, by step) or peak (largest) finite value, or None."""
    if not points:
        return None
    pairs = [
        (step, value)
        for step, value in zip(points["steps"], points["values"], strict=True)
        if value is not None and value == value and abs(value) != float("inf")
    ]
    if not pairs:
        return None
    if at == "peak":
        return float(max(value for _, value in pairs))
    return float(max(pairs, key=lambda pair: pair[0])[1])
