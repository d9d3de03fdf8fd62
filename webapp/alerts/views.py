"""The live radar's alerts: the page at /alerts/ and GET /api/v1/alerts.

Both list the newest events across runs (or one experiment's, one run's, one kind's; with
`state=current` only those the radar still reports, with `state=retracted` only the provisional
ones it stopped reporting, each with when and why), read from the `Alert` rows that
`alerts.py` keeps after every write; anyone signed in may read
them, as every other page and read of the API. Runs an MLflow client deleted, and their
experiments, are left out until restored (`webapp/runs/lifecycle.py`).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from vocabulary.names import ALERT_KINDS
from webapp.alerts.radar import alert_json, describe
from webapp.experiments.models import Alert, Experiment, Run
from webapp.ids import whole_number
from webapp.jsonapi.http import ApiError, api_view
from webapp.runs.lifecycle import live_experiments, live_run
from webapp.runs.serialize import run_label

PAGE_SIZE = 200  # the page shows this many of the newest
API_DEFAULT_LIMIT = 100
API_MAX_LIMIT = 1000
STATES = {"current": "still reported", "retracted": "retracted"}  # "" (the default): both


def _whole(params, name: str, errors: dict[str, str], maximum: int = 2**31 - 1) -> int | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    number = whole_number(raw)
    if number is None or not 0 < number <= maximum:
        errors[name] = f"a whole number from 1 to {maximum}"
        return None
    return number


def filtered_alerts(params) -> tuple[QuerySet, dict[str, object], dict[str, str]]:
    """The alerts the query parameters ask for, the filters read and any bad parameters."""
    errors: dict[str, str] = {}
    filters = {
        "experiment": _whole(params, "experiment", errors),
        "run": _whole(params, "run", errors),
        "kind": params.get("kind", "").strip() or None,
        "state": params.get("state", "").strip() or None,
    }
    if filters["kind"] is not None and filters["kind"] not in ALERT_KINDS:
        errors["kind"] = f"one of {', '.join(ALERT_KINDS)}"
    if filters["state"] is not None and filters["state"] not in STATES:
        errors["state"] = f"one of {', '.join(STATES)} (or none: both)"
    alerts = Alert.objects.filter(live_run("run__")).select_related("run", "run__experiment")
    alerts = alerts.order_by("-created", "-id")
    if filters["experiment"] is not None:
        alerts = alerts.filter(run__experiment_id=filters["experiment"])
    if filters["run"] is not None:
        alerts = alerts.filter(run_id=filters["run"])
    if filters["kind"] and "kind" not in errors:
        alerts = alerts.filter(kind=filters["kind"])
    if filters["state"] in STATES:
        alerts = alerts.filter(retracted__isnull=filters["state"] == "current")
    return alerts, filters, errors


@login_required
def alerts_page(request: HttpRequest) -> HttpResponse:
    alerts, filters, errors = filtered_alerts(request.GET)
    rows = list(alerts[:PAGE_SIZE]) if not errors else []
    for alert in rows:
        alert.label = run_label(alert.run)
        alert.text = describe(alert, alert.run)
    context = {
        "alerts": rows,
        "filters": filters,
        "errors": errors,
        "kinds": ALERT_KINDS,
        "states": STATES,
        "experiments": live_experiments(Experiment.objects.filter(runs__alerts__isnull=False))
        .distinct()
        .only("id", "name"),
        "page_size": PAGE_SIZE,
    }
    return render(request, "alerts/alerts.html", context, status=400 if errors else 200)


@api_view("GET")
def alerts_api(request: HttpRequest) -> JsonResponse:
    """?experiment=&run=&kind=&state=&limit= → {"alerts": [...]}, newest first."""
    alerts, filters, errors = filtered_alerts(request.GET)
    limit = _whole(request.GET, "limit", errors, API_MAX_LIMIT) or API_DEFAULT_LIMIT
    if errors:
        raise ApiError(400, "Invalid query.", errors)
    if filters["run"] is not None and not Run.objects.filter(id=filters["run"]).exists():
        raise ApiError(404, f"There is no run {filters['run']}.")
    if (
        filters["experiment"] is not None
        and not Experiment.objects.filter(id=filters["experiment"]).exists()
    ):
        raise ApiError(404, f"There is no experiment {filters['experiment']}.")
    return JsonResponse({"alerts": [alert_json(a, a.run) for a in alerts[:limit]]})
