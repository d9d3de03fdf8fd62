"""Which runs are seeds: the one rule of the statistics page, the panel's matrix ("Seeds 3",
"compare 3 →"), its attribution view ("1 of 3 attributed"), the seed bands and the
experiment page's key results.

A seed is a run of the experiment's own (not a branch: a branch continues a parent's seed with
a change) that succeeded, or is queued or running (it has no final numbers yet, but it is a
seed on the way). A failed or cancelled run stopped somewhere arbitrary, often before its
first step, so its "final" means nothing: it is left out, and each page that leaves it out
says how many it left out (`left_out_note`). Runs an MLflow client deleted are already out
(`webapp/runs/lifecycle.py`).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q, QuerySet

from webapp.experiments.models import Run

NOT_SEEDS = (Run.FAILED, Run.CANCELLED)  # stopped somewhere arbitrary: no final numbers


def seed_status(status: str) -> bool:
    """Whether a run in `status` counts as a seed (branches aside)."""
    return status not in NOT_SEEDS


def seed_condition(path: str = "") -> Q:
    """The condition that the run at `path` ("" for a `Run` query) may be a seed by status."""
    return ~Q(**{f"{path}status__in": NOT_SEEDS})


def seeds_only(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` less the failed and cancelled ones."""
    return runs.filter(seed_condition())


def left_out(runs: Iterable[Run]) -> dict[str, int]:
    """{status: how many} of the runs among `runs` the rule leaves out, in NOT_SEEDS order."""
    counts = {status: 0 for status in NOT_SEEDS}
    for run in runs:
        if not seed_status(run.status):
            counts[run.status] += 1
    return {status: n for status, n in counts.items() if n}


def left_out_note(counts: dict[str, int]) -> str:
    """ "2 runs left out (1 failed, 1 cancelled): not seeds", or "" when none was."""
    total = sum(counts.values())
    if not total:
        return ""
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    runs = "1 run" if total == 1 else f"{total} runs"
    return f"{runs} left out ({parts}): a failed or cancelled run is not a seed"
