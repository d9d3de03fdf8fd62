"""Who may do what: the one permission helper of the pages and the API.

Troupe is a team tool: anyone signed in may read every experiment and run. Only the owner of
an experiment, or staff, may change it: queue its runs again, cancel, delete, log metrics
into its runs.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from webapp.experiments.models import Experiment, Run


def can_manage(user, experiment: Experiment) -> bool:
    return bool(user.is_staff or experiment.owner_id == user.id)


def get_experiment_for_user(user, experiment_id: int, manage: bool = False) -> Experiment:
    """The experiment, or Http404; PermissionDenied when `manage` and the user may not."""
    try:
        experiment = Experiment.objects.select_related("owner").get(id=experiment_id)
    except Experiment.DoesNotExist:
        raise Http404(f"There is no experiment {experiment_id}.") from None
    if manage and not can_manage(user, experiment):
        raise PermissionDenied("Only the owner of this experiment or staff may change it.")
    return experiment


def get_run_for_user(user, run_id: int, manage: bool = False) -> Run:
    """The run (with its experiment), or Http404; PermissionDenied as above."""
    try:
        run = Run.objects.select_related("experiment").get(id=run_id)
    except Run.DoesNotExist:
        raise Http404(f"There is no run {run_id}.") from None
    if manage and not can_manage(user, run.experiment):
        raise PermissionDenied("Only the owner of this run's experiment or staff may change it.")
    return run
