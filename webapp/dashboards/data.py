"""The panel's queries: who is looking, which experiments and runs they may see, and the
(downsampled) series the figures draw.

Every callback starts here. The signed-in user comes from the login wrapper
(`webapp/dashboards/mount.py`), which sets `viewer()` for the length of each request. Troupe is
a team tool (`webapp/runs/access.py`): anyone signed in may read every experiment and
run, so the panel only checks that someone is signed in; outside a request nothing is visible.
A run id that does not exist is ignored, never an error; so is a run an MLflow client deleted
(or one of an experiment it deleted: `webapp/runs/lifecycle.py`), which no picker, comparison
or count shows until it is restored, as MLflow's UI hides it. Series for figures go through
`read_runs_series` (one query for all the runs) with `MAX_POINTS`, which keeps the first and
last points, each bucket's minimum and maximum and its first gap (NaN/inf), so peaks,
cliffs and divergences stay visible while a 10,000-step run costs 500 points.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db.models import Count, Q

from vocabulary.names import GRAD_COS_PREFIX, MATRIX_AXES, ROLE_PREFIX
from webapp.experiments.models import Experiment, Run
from webapp.metrics import metric_keys, read_runs_series  # noqa: F401 (the pages' key list)
from webapp.runs.lifecycle import live_experiments, live_run, live_runs
from webapp.runs.seeds import NOT_SEEDS, seeds_only

MAX_POINTS = 500  # per series drawn: enough for a smooth line at any screen width
LIVE_STATUSES = Run.ACTIVE  # queued or running: verdicts are provisional, views refresh

# Run columns no view shows: a thousand configs would cost more to decode than the rest.
_BULKY = ("config", "error_message", "error_traceback")

_viewer: ContextVar[Any] = ContextVar("troupe_dash_viewer", default=None)


def viewer():
    """The user of the current panel request (None outside one: then nothing is visible)."""
    return _viewer.get()


@contextmanager
def viewing_as(user) -> Iterator[None]:
    """Run the enclosed code as `user`: the login wrapper around each request, and tests."""
    token = _viewer.set(user)
    try:
        yield
    finally:
        _viewer.reset(token)


# --- what the viewer may see ------------------------------------------------------------------


def _signed_in(user) -> bool:
    return user is not None and user.is_authenticated


def experiments(user) -> list[Experiment]:
    """Every experiment, newest first, each with `n_runs` and `n_live` counted."""
    if not _signed_in(user):
        return []
    live = live_run("runs__")
    return list(
        live_experiments(Experiment.objects.select_related("owner")).annotate(
            n_runs=Count("runs", filter=live),
            n_live=Count("runs", filter=live & Q(runs__status__in=LIVE_STATUSES)),
        )
    )


def experiment(user, experiment_id: int | None) -> Experiment | None:
    if experiment_id is None or not _signed_in(user):
        return None
    return live_experiments(Experiment.objects.filter(id=experiment_id)).first()


def runs(user, run_ids: Sequence[int]) -> list[Run]:
    """The runs among `run_ids`, in the order given (unknown and deleted ids dropped)."""
    if not run_ids or not _signed_in(user):
        return []
    found = live_runs(Run.objects.filter(id__in=run_ids)).defer(*_BULKY).in_bulk()
    return [found[i] for i in run_ids if i in found]


def experiment_run_ids(user, experiment_id: int | None) -> list[int]:
    """The ids of an experiment's runs, in the order they were made."""
    if experiment_id is None or not _signed_in(user):
        return []
    found = live_runs(Run.objects.filter(experiment_id=experiment_id))
    return list(found.order_by("id").values_list("id", flat=True))


def experiment_seeds(experiment: Experiment) -> list[Run]:
    """An experiment's seeds (`webapp/runs/seeds.py`: root runs, not failed or cancelled):
    the attribution view's cells."""
    roots = experiment.runs.filter(parent__isnull=True, branch_step__isnull=True)
    return list(seeds_only(live_runs(roots)))


def configs(run_ids: Sequence[int]) -> dict[int, dict]:
    """`{run_id: config}`: the stored config of each run (the views' run rows leave it out)."""
    return dict(Run.objects.filter(id__in=list(run_ids)).values_list("id", "config"))


def sibling_runs(runs: Sequence[Run]) -> list[Run]:
    """Every run of the experiments the given runs belong to: what a compare view offers."""
    experiment_ids = {run.experiment_id for run in runs}
    return list(
        live_runs(Run.objects.filter(experiment_id__in=experiment_ids))
        .defer(*_BULKY)
        .order_by("experiment_id", *MATRIX_AXES, "id")
    )


def status_counts(runs: Sequence[Run]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.status] = counts.get(run.status, 0) + 1
    return counts


def experiment_status_counts(experiment: Experiment) -> dict[str, int]:
    """{status: runs} in one aggregate query: a thousand-run matrix needs no Run rows."""
    rows = live_runs(experiment.runs.all()).order_by().values_list("status").annotate(n=Count("id"))
    return dict(rows)


def seeds_left_out(experiment: Experiment) -> dict[str, int]:
    """{status: root runs} of the failed and cancelled root runs: not seeds, and the matrix
    says how many it left out."""
    roots = live_runs(experiment.runs.filter(parent__isnull=True, branch_step__isnull=True))
    rows = roots.filter(status__in=NOT_SEEDS).order_by().values_list("status")
    counts = dict(rows.annotate(n=Count("id")))
    return {status: counts[status] for status in NOT_SEEDS if counts.get(status)}


def any_live(runs: Sequence[Run]) -> bool:
    """Whether a view of these runs should keep refreshing itself."""
    return any(run.status in LIVE_STATUSES for run in runs)


def counts_live(counts: dict[str, int]) -> bool:
    return any(counts.get(status) for status in LIVE_STATUSES)


# --- series ---------------------------------------------------------------------------------------


def series(
    run_ids: Sequence[int],
    keys: Sequence[str] | dict[int, Sequence[str]],
    max_points: int = MAX_POINTS,
) -> dict[int, dict[str, dict[str, list]]]:
    """`{run_id: {key: {"steps", "values"}}}`, downsampled to `max_points` per series.

    `keys` is one list for every run, or `{run_id: keys}` when runs log different keys.
    """
    if not isinstance(keys, dict):
        return read_runs_series(list(run_ids), list(keys), max_points)
    every_key = sorted({key for run_id in run_ids for key in keys.get(run_id, [])})
    read = read_runs_series(list(run_ids), every_key, max_points)
    return {
        run_id: {key: read[run_id][key] for key in keys.get(run_id, []) if key in read[run_id]}
        for run_id in run_ids
    }


def gradient_keys(keys: Sequence[str]) -> list[str]:
    """The keys the gradient view draws: per-role norm and share, and pairwise cosines."""
    return [
        key
        for key in keys
        if key.startswith(GRAD_COS_PREFIX)
        or (key.startswith(ROLE_PREFIX) and key.endswith(("/grad_norm", "/grad_share")))
    ]
