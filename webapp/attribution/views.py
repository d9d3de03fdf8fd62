"""The run page's forms and the JSON API of swap jobs (attributions and mix-and-match).

Pages: `POST /runs/<id>/attribute/` (`kind`) and `POST /runs/<id>/mix/` (`role_<role>` =
source) queue a job and return to the run page, or say there why not. API:

- `GET /api/v1/runs/<id>/attribution-plan?kind=gain|peak_gain|cliff` → the plan: evaluations,
  those reused from the run's own, the estimated seconds, or `problem` (why it cannot run);
- `GET /api/v1/runs/<id>/swap-jobs` → `{"jobs": […]}`, newest first;
  `POST` `{"kind": "gain"}` or `{"kind": "mix", "sources": {role: source}}` → 201 the job
  (200 with the job already queued or running for that kind), 409 naming why it cannot run;
- `GET /api/v1/swap-jobs/<id>` → the job, with its per-problem accuracies and result;
- `POST /api/v1/swap-jobs/<id>/cancel` → `{"id", "status", "cancel_requested": true}`: a
  queued job is cancelled at once, a running one stops after its current evaluation (409
  when it has already finished).

Reading needs a login, queueing the owner of the run's experiment or staff.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from webapp.attribution.models import SwapJob
from webapp.attribution.planning import KINDS, Plan, plan_job, plan_mix
from webapp.attribution.queueing import cancel_job, queue_job
from webapp.jsonapi.http import ApiError, api_view, read_json
from webapp.runs.access import get_run_for_user

MAX_SOURCE = 100  # characters of one role's source (`RUN:NAME` at most: never a path)


def _queue_from_page(request: HttpRequest, run, plan: Plan) -> HttpResponse:
    if plan.problem:
        messages.error(request, f"Not queued: {plan.problem}.")
    else:
        job, new = queue_job(run, plan)
        what = f"{job.total} evaluations" if job.total != 1 else "1 evaluation"
        messages.success(
            request, f"Queued swap job {job.id} ({what})." if new else "Already queued."
        )
    return redirect(f"/runs/{run.id}/#attribution")


@login_required
@require_POST
def attribute_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    kind = request.POST.get("kind", "")
    if kind not in KINDS:
        messages.error(request, f"Not queued: kind {kind!r} is not one of {', '.join(KINDS)}.")
        return redirect(f"/runs/{run.id}/#attribution")
    return _queue_from_page(request, run, plan_job(run, kind))


@login_required
@require_POST
def mix_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    sources = {
        key.removeprefix("role_"): value.strip()[:MAX_SOURCE]
        for key, value in request.POST.items()
        if key.startswith("role_") and value.strip()
    }
    try:
        plan = plan_mix(run, sources, request.user)
    except ValueError as exc:
        messages.error(request, f"Not queued: {exc}.")
        return redirect(f"/runs/{run.id}/#attribution")
    return _queue_from_page(request, run, plan)


@api_view("GET")
def plan_api(request: HttpRequest, run_id: int) -> JsonResponse:
    run = get_run_for_user(request.user, run_id)
    kind = request.GET.get("kind", "gain")
    if kind not in KINDS:
        raise ApiError(400, "bad kind", {"kind": f"one of {', '.join(KINDS)}"})
    return JsonResponse(plan_job(run, kind).as_json())


def _sources(data: dict) -> dict[str, str]:
    sources = data.get("sources", {})
    if not isinstance(sources, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and 0 < len(v) <= MAX_SOURCE
        for k, v in sources.items()
    ):
        raise ApiError(
            400,
            "bad sources",
            {
                "sources": f"an object of role: source (base, best, latest, step-N, RUN:NAME), "
                f"each at most {MAX_SOURCE} characters"
            },
        )
    return sources


@api_view("GET", "POST")
def jobs_api(request: HttpRequest, run_id: int) -> JsonResponse:
    if request.method == "GET":
        run = get_run_for_user(request.user, run_id)
        return JsonResponse({"jobs": [job.as_json() for job in run.swap_jobs.all()]})
    run = get_run_for_user(request.user, run_id, manage=True)
    data = read_json(request)
    kind = data.get("kind")
    if kind == "mix":
        try:
            plan = plan_mix(run, _sources(data), request.user)
        except ValueError as exc:
            raise ApiError(400, "bad sources", {"sources": str(exc)}) from None
    elif kind in KINDS:
        plan = plan_job(run, kind)
    else:
        raise ApiError(400, "bad kind", {"kind": f"one of {', '.join([*KINDS, 'mix'])}"})
    if plan.problem:
        raise ApiError(409, f"Run {run.id} cannot be evaluated so: {plan.problem}.")
    job, new = queue_job(run, plan)
    return JsonResponse(job.as_json(), status=201 if new else 200)


def _job(job_id: int) -> SwapJob:
    try:
        return SwapJob.objects.select_related("run").get(id=job_id)
    except SwapJob.DoesNotExist:
        raise Http404(f"There is no swap job {job_id}.") from None


@api_view("GET")
def job_api(request: HttpRequest, job_id: int) -> JsonResponse:
    job = _job(job_id)
    get_run_for_user(request.user, job.run_id)
    return JsonResponse(job.as_json())


@api_view("POST")
def cancel_job_api(request: HttpRequest, job_id: int) -> JsonResponse:
    job = _job(job_id)
    get_run_for_user(request.user, job.run_id, manage=True)
    if job.status not in SwapJob.ACTIVE:
        raise ApiError(409, f"Swap job {job_id} has already {job.status}; nothing to cancel.")
    status = cancel_job(job)
    return JsonResponse({"id": job_id, "status": status, "cancel_requested": True})
