"""The run page's artifacts: the list (a template tag, so the run view stays as it is) and
the signed-in download each entry links to."""

from __future__ import annotations

from django import template
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse

from webapp.experiments.access import get_run_for_user
from webapp.experiments.models import Run
from webapp.tracking import artifacts
from webapp.tracking.artifact_views import download_response
from webapp.tracking.protocol import MlflowError

register = template.Library()

LISTED = 200  # files shown on the page; the MLflow API lists them all


@register.inclusion_tag("tracking/_artifacts.html")
def artifact_panel(run: Run) -> dict:
    files = artifacts.walk(artifacts.run_folder(run.id))
    return {"run": run, "files": files[:LISTED], "more": max(0, len(files) - LISTED)}


@login_required
def artifact_download(request: HttpRequest, run_id: int, path: str) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)  # reading is open to every signed-in user
    try:
        if path in ("", ".", "..") or any(p in ("", ".", "..") for p in path.split("/")):
            raise Http404("No such artifact.")
        handle = artifacts.open_file(artifacts.run_folder(run.id), path)
    except MlflowError:
        raise Http404("No such artifact.") from None
    return download_response(handle, path.rsplit("/", 1)[-1])
