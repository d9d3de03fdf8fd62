"""Attribution across an experiment's matrix, beside the gradient: which role carries the gain
in each cell (workflow × task × model × sharing), and which role took the gradient.

Per run: each role's share of the change from the run's latest succeeded attribution of `kind`
(`gain` by default), as a fraction of the change (its Shapley value divided by v(all) −
v(none); none when the change is 0), and each role's gradient mass, the mean over logged
steps of ‖g_role‖ / Σ_roles ‖g_role‖ (from `role/<r>/grad_norm`). Under `shared` that is the
role's `grad_share`; under `per_role` every role has a policy of its own, so its logged
`grad_share` is 1 and the norms are what compare the roles. Per cell: the means over the
runs that have each figure, with how many runs have an attribution, and the interval of the
share of the gain: with one attributed run, its paired-bootstrap 95% interval over problems
(the Shapley value's, over the change); with several, the span of theirs (from the lowest
low to the highest high: no narrower than any run's, as a mean of a handful of runs earns no
tighter claim here). The panel's attribution
page (`webapp/dashboards/pages/attribution.py`) draws the two side by side.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from analysis.intervals import Estimate
from trainer.routing import WORKFLOW_ROLES
from vocabulary.names import CELL_AXES, GRAD_NORM, role_key
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Run
from webapp.metrics import read_runs_series


def gradient_mass(series: dict[str, dict], roles: list[str]) -> dict[str, float]:
    """{role: mean over steps of its share of the roles' summed gradient norm}, over the steps
    where any role logged a finite norm; a role that logged none in a step put no gradient
    (a frozen role, a role without turns that step): 0. {} when no step has a norm."""
    by_step: dict[int, dict[str, float]] = defaultdict(dict)
    for role in roles:
        found = series.get(role_key(role, GRAD_NORM)) or {}
        for step, value in zip(found.get("steps", []), found.get("values", [])):
            if value is not None and value == value:
                by_step[step][role] = float(value)
    fractions: dict[str, list[float]] = defaultdict(list)
    for norms in by_step.values():
        total = sum(norms.values())
        if total > 0:
            for role in roles:
                fractions[role].append(norms.get(role, 0.0) / total)
    return {role: statistics.fmean(v) for role, v in fractions.items()}


def latest_results(run_ids: list[int], kind: str) -> dict[int, dict]:
    """{run id: the result of its latest succeeded `kind` attribution}."""
    found: dict[int, dict] = {}
    jobs = SwapJob.objects.filter(run_id__in=run_ids, kind=kind, status=SwapJob.SUCCEEDED)
    for run_id, result in jobs.order_by("run_id", "-id").values_list("run_id", "result"):
        found.setdefault(run_id, result)
    return found


def _estimates(result: dict) -> tuple[Estimate, dict[str, Estimate]]:
    """A stored result's change and its shares by role, read into `Estimate`s."""
    shares = {role: Estimate.from_share(share) for role, share in result["shares"].items()}
    return Estimate.from_share(result["change"]), shares


def _fractions(result: dict) -> dict[str, float]:
    change, shares = _estimates(result)
    if change.mean == 0:
        return {}
    return {role: share.mean / change.mean for role, share in shares.items()}


def _fraction_bounds(result: dict) -> dict[str, tuple[float, float]]:
    """{role: (low, high)}: the share's 95% interval over the change (swapped when the change
    is negative)."""
    change, shares = _estimates(result)
    if change.mean == 0:
        return {}
    bounds = {}
    for role, share in shares.items():
        a, b = share.low / change.mean, share.high / change.mean
        bounds[role] = (min(a, b), max(a, b))
    return bounds


def attribution_cells(runs: list[Run], kind: str = "gain") -> list[dict]:
    """One row per (cell, role): the cell's axes (`CELL_AXES`), "role", "share", "fraction",
    "fraction_low", "fraction_high", "gradient", "attributed", "runs", "run_ids"; `share` the
    mean Shapley value, `fraction` the mean share of the change with its interval (the
    module docstring says which), `gradient` the mean gradient mass (None where no run has
    it)."""
    ids = [run.id for run in runs]
    results = latest_results(ids, kind)
    keys = sorted(
        {role_key(r, GRAD_NORM) for run in runs for r in WORKFLOW_ROLES.get(run.workflow, ())}
    )
    series = read_runs_series(ids, keys) if keys else {}
    cells: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        cells[tuple(getattr(run, f) for f in CELL_AXES)].append(run)
    rows = []
    for cell, members in sorted(cells.items()):
        roles = list(WORKFLOW_ROLES.get(cell[0], ()))
        attributed = [results[r.id] for r in members if r.id in results]
        masses = [gradient_mass(series.get(r.id, {}), roles) for r in members]
        for role in roles:
            shares = [_estimates(res)[1][role].mean for res in attributed if role in res["shares"]]
            fractions = [f[role] for res in attributed if role in (f := _fractions(res))]
            bounds = [b[role] for res in attributed if role in (b := _fraction_bounds(res))]
            grads = [m[role] for m in masses if role in m]
            rows.append(
                {
                    **dict(zip(CELL_AXES, cell)),
                    "role": role,
                    "share": statistics.fmean(shares) if shares else None,
                    "fraction": statistics.fmean(fractions) if fractions else None,
                    "fraction_low": min(lo for lo, _ in bounds) if bounds else None,
                    "fraction_high": max(hi for _, hi in bounds) if bounds else None,
                    "gradient": statistics.fmean(grads) if grads else None,
                    "attributed": len(attributed),
                    "runs": len(members),
                    "run_ids": [r.id for r in members],
                }
            )
    return rows
