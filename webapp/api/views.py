"""The JSON API of docs/design.md §7, under /api/v1/.

Reading is open to anyone signed in; changing an experiment or its runs (queueing, logging
metrics, cancelling, resuming, finishing, deleting) needs its owner or staff
(`webapp/runs/access.py`). Validation of configs and matrices is `trainer.config`'s,
the same as the form's; its errors come back as 400 with `fields` naming each bad field
(`config.<field>`, `matrix.<axis>`, `preset`). The lists and the many-run series leave out
what an MLflow client deleted (`webapp/runs/lifecycle.py`); a deleted run's or experiment's
own `GET` still answers, so it can be restored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from trainer.config import FIELDS, INT_MAX, ConfigError
from vocabulary.names import CELL_AXES
from webapp.alerts.points import record_points
from webapp.alerts.radar import settle_run
from webapp.experiments.models import Experiment, Run, RunLog
from webapp.ids import whole_number
from webapp.jsonapi.http import ApiError, api_view, read_json
from webapp.metrics import read_runs_series, read_series
from webapp.runs.access import get_experiment_for_user, get_run_for_user
from webapp.runs.cells import run_columns
from webapp.runs.lifecycle import live_experiments, live_runs
from webapp.runs.queueing import cancel_run, create_experiment, resume_problem, resume_run
from webapp.runs.run_files import delete_runs
from webapp.runs.serialize import experiment_json, run_json

MAX_ERRORS = 20  # bad points named in one answer; more would only bury the first
MAX_SERIES_RUNS = 1000  # runs one series request may name: a thousand-run matrix at once


def _text(data: dict, name: str, *, required: bool, limit: int) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ApiError(400, "Invalid request.", {name: "required: a non-empty string"})
    if len(value) > limit:
        raise ApiError(400, "Invalid request.", {name: f"at most {limit} characters"})
    return value.strip()


def _object(data: dict, name: str) -> dict:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(400, "Invalid request.", {name: "must be a JSON object"})
    return value


def _id(value: Any, name: str) -> int:
    if isinstance(value, bool):
        value = None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ApiError(400, "Invalid request.", {name: "required: a whole-number id"}) from None
    if number < 1 or (isinstance(value, float) and not value.is_integer()):
        raise ApiError(400, "Invalid request.", {name: "required: a whole-number id"})
    return number


def _config_errors(exc: ConfigError, config: dict, matrix: dict) -> dict[str, str]:
    """trainer.config's error keys as paths into the request body. A bad value of an axis
    the matrix gives is the matrix's, even when trainer.config names the bare field."""
    named = {}
    for key, message in exc.errors.items():
        if key in matrix:
            key = f"matrix.{key}"
        elif key in FIELDS or key in config:
            key = f"config.{key}"
        named[key] = message
    return named


# --- experiments -------------------------------------------------------------------------------


LIST_LIMIT = 100  # experiments one GET answers unless `limit` says otherwise (at most 1000)


@api_view("GET", "POST")
def experiments(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        return _list_experiments(request)
    data = read_json(request)
    name = _text(data, "name", required=True, limit=200)
    description = _text(data, "description", required=False, limit=10_000)
    preset = data.get("preset") or ""
    if not isinstance(preset, str):
        raise ApiError(400, "Invalid experiment.", {"preset": "must be a preset name"})
    config, matrix = _object(data, "config"), _object(data, "matrix")
    try:
        experiment = create_experiment(
            request.user, name, description=description, preset=preset, config=config, matrix=matrix
        )
    except ConfigError as exc:
        raise ApiError(400, "Invalid experiment.", _config_errors(exc, config, matrix)) from None
    runs = list(experiment.runs.all())
    answer = experiment_json(experiment, runs)
    if experiment.warnings:  # e.g. no worker has reported its GPUs yet
        answer["warnings"] = experiment.warnings
    return JsonResponse(answer, status=201)


def _count(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ApiError(400, "Invalid request.", {name: f"a whole number from {low} to {high}"})
    return value


def _list_experiments(request: HttpRequest) -> JsonResponse:
    """Newest first, each with its run counts by status (not its runs: a list of a thousand
    experiments must stay small); `GET /api/v1/experiments/<id>` has the runs."""
    limit = _count(request, "limit", LIST_LIMIT, 1, 1000)
    offset = _count(request, "offset", 0, 0, INT_MAX)
    found = live_experiments(Experiment.objects.select_related("owner"))
    found = found.order_by("-created", "-id")
    total = found.count()
    page = list(found[offset : offset + limit])
    counts: dict[int, dict[str, int]] = {e.id: {} for e in page}
    rows = (
        live_runs(Run.objects.filter(experiment_id__in=list(counts)))
        .values_list("experiment_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for experiment_id, status, n in rows:
        counts[experiment_id][status] = n
    listed = []
    for experiment in page:
        entry = experiment_json(experiment, [])
        del entry["runs"]
        entry["run_counts"] = counts[experiment.id]
        listed.append(entry)
    return JsonResponse({"experiments": listed, "total": total, "offset": offset, "limit": limit})


@api_view("GET", "DELETE")
def experiment(request: HttpRequest, experiment_id: int) -> JsonResponse:
    manage = request.method == "DELETE"
    found = get_experiment_for_user(request.user, experiment_id, manage=manage)
    if request.method == "DELETE":
        if found.runs.filter(status=Run.RUNNING, external=False).exists():
            raise ApiError(409, "Some of its runs are running: cancel them first.")
        with transaction.atomic():
            delete_runs(found.runs.all())
            found.delete()
        return JsonResponse({"deleted": experiment_id})
    return JsonResponse(experiment_json(found, list(live_runs(found.runs.all()))))


# --- runs ----------------------------------------------------------------------------------------


@api_view("GET", "POST")
def runs(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        raw = request.GET.get("experiment")
        if raw is None:
            raise ApiError(400, "Say which experiment's runs.", {"experiment": "required"})
        found = get_experiment_for_user(request.user, _id(raw, "experiment"))
        return JsonResponse({"runs": [run_json(run) for run in live_runs(found.runs.all())]})

    data = read_json(request)
    name = _text(data, "name", required=True, limit=200)
    if data.get("experiment") is None:
        raise ApiError(400, "Invalid run.", {"experiment": "required: the id of an experiment"})
    found = get_experiment_for_user(
        request.user, _id(data["experiment"], "experiment"), manage=True
    )
    config = _object(data, "config")
    cell, seed, steps = _external_columns(config)
    run = Run.objects.create(
        experiment=found,
        name=name,
        external=True,
        config=config,
        status=Run.RUNNING,
        started=timezone.now(),
        seed=seed,
        total_steps=steps,
        **cell,
    )
    RunLog.objects.create(run=run, line=f"External run created through the API by {request.user}.")
    return JsonResponse(run_json(run, detail=True, viewer=request.user), status=201)


def _external_columns(config: dict) -> tuple[dict[str, str], int, int]:
    """The columns an external run copies out of its free-form config (`run_columns`: the
    cell as text, the seed and the step count as whole numbers, 0 when not given as one). A
    value its column cannot hold is a 400 naming `config.<field>`, not a database error."""
    columns = run_columns(config)
    if columns.problems:
        fields = {f"config.{name}": problem for name, problem in columns.problems.items()}
        raise ApiError(400, "Invalid run.", fields)
    cell = {axis: columns.cell.get(axis, "") for axis in CELL_AXES}
    return cell, columns.seed or 0, columns.total_steps or 0


@api_view("GET", "DELETE")
def run(request: HttpRequest, run_id: int) -> JsonResponse:
    found = get_run_for_user(request.user, run_id, manage=request.method == "DELETE")
    if request.method == "DELETE":
        if found.status == Run.RUNNING and not found.external:
            raise ApiError(409, f"Run {run_id} is running: cancel it first.")
        delete_runs(Run.objects.filter(id=run_id))
        return JsonResponse({"deleted": run_id})
    return JsonResponse(run_json(found, detail=True, viewer=request.user))


@api_view("POST")
def cancel(request: HttpRequest, run_id: int) -> JsonResponse:
    found = get_run_for_user(request.user, run_id, manage=True)
    if found.status in Run.FINISHED:
        raise ApiError(409, f"Run {run_id} has already {found.status}; there is nothing to cancel.")
    status = cancel_run(found)
    return JsonResponse({"id": run_id, "status": status, "cancel_requested": True})


@api_view("POST")
def resume(request: HttpRequest, run_id: int) -> JsonResponse:
    found = get_run_for_user(request.user, run_id, manage=True)
    if found.external:
        raise ApiError(409, f"Run {run_id} is external: it is not trained here.")
    if problem := resume_problem(found):
        raise ApiError(409, f"Run {run_id} cannot resume. {problem}")
    if not resume_run(found):
        raise ApiError(
            409, f"Run {run_id} is {found.status}; only failed or cancelled runs resume."
        )
    found.refresh_from_db()
    return JsonResponse(run_json(found))


@api_view("POST")
def finish(request: HttpRequest, run_id: int) -> JsonResponse:
    """End an external run: {"status": "succeeded" | "failed", "error"?: "message"}."""
    found = get_run_for_user(request.user, run_id, manage=True)
    if not found.external:
        raise ApiError(409, f"Run {run_id} is trained by a worker; cancel it instead.")
    data = read_json(request)
    status = data.get("status")
    if status not in (Run.SUCCEEDED, Run.FAILED):
        raise ApiError(400, "Invalid request.", {"status": "one of succeeded, failed"})
    message = _text(data, "error", required=False, limit=10_000)
    with transaction.atomic():  # the end and the radar's verdict on it, together
        updated = Run.objects.filter(id=run_id, status=Run.RUNNING).update(
            status=status,
            finished=timezone.now(),
            error_type="ExternalError" if status == Run.FAILED else "",
            error_message=message if status == Run.FAILED else "",
        )
        if updated:
            settle_run(run_id)
    if not updated:
        raise ApiError(409, f"Run {run_id} has already {found.status}.")
    found.refresh_from_db()
    return JsonResponse(run_json(found))


# --- metrics -------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # A JSON integer may be too big for a float; NaN and ±inf (which Python's JSON reader
    # accepts) are stored as missing values.
    return not isinstance(value, int) or abs(value) < 2**1023


def _points(data: dict) -> list[tuple[str, int, float | None]]:
    points = data.get("points")
    if not isinstance(points, list):
        raise ApiError(
            400, "Invalid metrics.", {"points": "required: a list of {key, step, value}"}
        )
    limit = settings.TROUPE_API_MAX_POINTS
    if len(points) > limit:
        raise ApiError(413, f"{len(points)} points is more than {limit} per request; send batches.")
    parsed, errors = [], {}
    for i, point in enumerate(points):
        problem = None
        if not isinstance(point, dict):
            problem = ("", "must be an object {key, step, value}")
        else:
            key, step, value = point.get("key"), point.get("step"), point.get("value")
            if not isinstance(key, str) or not key or len(key) > 200:
                problem = (".key", "a non-empty string of at most 200 characters")
            elif isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= INT_MAX:
                problem = (".step", f"a whole number from 0 to {INT_MAX}")
            elif value is not None and not _is_number(value):
                problem = (".value", "a number, or null for a missing value")
            else:
                parsed.append((key, step, value))
        if problem:
            errors[f"points[{i}]{problem[0]}"] = problem[1]
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        raise ApiError(400, "Invalid metrics: nothing was stored.", errors)
    return parsed


@api_view("GET", "POST")
def metrics(request: HttpRequest, run_id: int) -> JsonResponse:
    if request.method == "POST":
        found = get_run_for_user(request.user, run_id, manage=True)
        points = _points(read_json(request))
        record_points(found.id, points)  # one statement on PostgreSQL, atomic by itself
        if found.external and points:
            # An external run's progress is the last step its client logged: no worker counts
            # its steps, and a finished run once read "step 0 of 8". A conditional
            # UPDATE, so concurrent batches only ever move it forward.
            last = max(int(step) for _, step, _ in points)
            Run.objects.filter(id=found.id, step__lt=last).update(step=last)
        return JsonResponse({"accepted": len(points)})

    found = get_run_for_user(request.user, run_id)
    keys, max_points = _series_query(request)
    return JsonResponse({"series": read_series(found.id, keys, max_points)})


@api_view("GET")
def runs_metrics(request: HttpRequest) -> JsonResponse:
    """The same keys of many runs in one request and one query (a compare view): the runs
    named (`?runs=3,7,9`) or every run of an experiment (`?experiment=5`), with `keys` and
    `max_points` as for one run → {"runs": {"3": {key: series}, …}} in that order. An
    experiment's runs leave out the deleted; runs named are answered, as a GET of one is."""
    if ("runs" in request.GET) == ("experiment" in request.GET):
        raise ApiError(400, "Say which runs.", {"runs": "either runs=3,7,9 or experiment=<id>"})
    if "experiment" in request.GET:
        found = get_experiment_for_user(request.user, _id(request.GET["experiment"], "experiment"))
        run_ids = list(live_runs(found.runs.order_by("id")).values_list("id", flat=True))
    else:
        run_ids = _run_ids(request.GET["runs"])
    keys, max_points = _series_query(request)
    series = read_runs_series(run_ids, keys, max_points)
    return JsonResponse({"runs": {str(run_id): series[run_id] for run_id in run_ids}})


def _run_ids(raw: str) -> list[int]:
    """Distinct ids, in the order given, of runs that exist (ApiError otherwise)."""
    numbers = [whole_number(piece) for piece in raw.split(",") if piece.strip()]
    if not numbers or len(numbers) > MAX_SERIES_RUNS or None in numbers:
        wrong = f"required: up to {MAX_SERIES_RUNS} comma-separated run ids, e.g. 3,7,9"
        raise ApiError(400, "Invalid request.", {"runs": wrong})
    run_ids = list(dict.fromkeys(numbers))
    known = set(Run.objects.filter(id__in=run_ids).values_list("id", flat=True))
    if missing := [run_id for run_id in run_ids if run_id not in known]:
        named = ", ".join(map(str, missing))
        raise ApiError(
            404, f"There is no run {named}." if len(missing) == 1 else f"There are no runs {named}."
        )
    return run_ids


def _series_query(request: HttpRequest) -> tuple[list[str] | None, int]:
    """`keys` (comma-separated; all when absent) and `max_points` (0: every point)."""
    keys_param = request.GET.get("keys")
    keys = [k for k in keys_param.split(",") if k] if keys_param else None
    raw = request.GET.get("max_points", "0")
    try:
        max_points = int(raw)
    except ValueError:
        max_points = -1
    if max_points < 0:
        raise ApiError(
            400, "Invalid request.", {"max_points": "0 (everything) or a positive number"}
        )
    return keys, max_points


@api_view("GET", "POST", "PUT", "PATCH", "DELETE")
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    raise ApiError(404, f"There is no API endpoint /api/v1/{rest}.")
