"""Where the links MLflow's client prints lead. "View run at <tracking URI>/#/experiments/<e>/
runs/<id>" is an address of MLflow's own UI, which Troupe does not serve; the browser keeps
its fragment through the sign-in redirect, and `static/mlflow_links.js`, on every page, sends
it here: to the run's page (or the experiment's), by MLflow id or Troupe number."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from webapp.tracking import store
from webapp.tracking.protocol import MlflowError


@login_required
def run_link(request: HttpRequest, run_id: str) -> HttpResponse:
    try:
        run = store.find_run(request.user, run_id)
    except MlflowError as exc:
        raise Http404(exc.message) from None
    return redirect("run_detail", run.id)


@login_required
def experiment_link(request: HttpRequest, experiment_id: str) -> HttpResponse:
    try:
        experiment = store.find_experiment(request.user, experiment_id)
    except MlflowError as exc:
        raise Http404(exc.message) from None
    if experiment is None:  # the caller's "Default", nothing logged into it yet
        return redirect("experiment_list")
    return redirect("experiment_detail", experiment.id)
