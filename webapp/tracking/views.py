"""The MLflow REST endpoints Troupe answers, under /api/2.0/mlflow/.

Write path: experiments/get-by-name, create, get; runs/create, get, update, log-batch,
log-metric, log-parameter, set-tag. Read path: runs/search, metrics/get-history,
experiments/search. What each does to Troupe's data is `webapp/tracking/store.py`'s; the
JSON shapes are `reads.py`'s; errors and authentication `protocol.py`'s. Reading is open to
any token holder (Troupe is a team tool); writing needs the experiment's owner or staff.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from webapp.experiments.models import Experiment, Run
from webapp.ids import whole_number
from webapp.metrics import history_json
from webapp.metrics.earlier import every_point_json, has_earlier
from webapp.tracking import logged_models, reads, search, store
from webapp.tracking.protocol import (
    INT64_MAX,
    INVALID,
    MISSING,
    MlflowError,
    entity_name,
    error_response,
    integer,
    list_param,
    mlflow_view,
    number,
    page_offset,
    page_token,
    proto_shape,
    run_id,
    text,
)
from webapp.tracking.store import Point

MAX_SEARCH_RESULTS = 50_000
DEFAULT_SEARCH_RESULTS = 1000
STEP_MIN, STEP_MAX = -(2**63), INT64_MAX  # any 64-bit step, as MLflow takes


def _ok(body: dict[str, Any] | None = None) -> JsonResponse:
    return JsonResponse(body or {})


# MLflow's ViewType, by name or number: which lifecycle stages a search returns.
VIEW_TYPES = {
    "ACTIVE_ONLY": ("active",),
    "DELETED_ONLY": ("deleted",),
    "ALL": ("active", "deleted"),
}
VIEW_NUMBERS = {1: "ACTIVE_ONLY", 2: "DELETED_ONLY", 3: "ALL"}


def _view_type(data: dict, name: str) -> tuple[str, ...]:
    raw = data.get(name) or "ACTIVE_ONLY"
    if isinstance(raw, str) and (number := whole_number(raw)) is not None:
        raw = number
    raw = VIEW_NUMBERS.get(raw, raw) if isinstance(raw, int) else raw
    if raw not in VIEW_TYPES:
        raise MlflowError(INVALID, f"{name} must be one of {', '.join(VIEW_TYPES)}, not {raw!r}.")
    return VIEW_TYPES[raw]


# --- experiments ---------------------------------------------------------------------------------


@mlflow_view("GET")
def experiment_by_name(request: HttpRequest, user, data: dict) -> JsonResponse:
    name = text(data, "experiment_name", required=True, limit=200)
    experiment = store.readable_by_name(user, name)
    if experiment is None:
        if name == "Default":
            return _ok({"experiment": reads.unmade_default_json()})
        raise MlflowError(MISSING, f"Could not find experiment with name '{name}'.")
    return _ok({"experiment": reads.experiment_json(experiment, user)})


@mlflow_view("POST")
def experiment_create(request: HttpRequest, user, data: dict) -> JsonResponse:
    name = text(data, "name", required=True, limit=200)
    if not name.strip():
        raise MlflowError(INVALID, "An experiment name must not be blank.")
    tags = store.checked_experiment_tags(list_param(data, "tags"))
    experiment = store.create_experiment(user, name, tags)
    return _ok({"experiment_id": str(experiment.id)})


@mlflow_view("GET")
def experiment_get(request: HttpRequest, user, data: dict) -> JsonResponse:
    raw = text(data, "experiment_id", required=True, limit=20)
    experiment = store.find_experiment(user, raw)
    if experiment is None:
        return _ok({"experiment": reads.unmade_default_json()})
    return _ok({"experiment": reads.experiment_json(experiment, user)})


@mlflow_view("GET", "POST")
def experiment_search(request: HttpRequest, user, data: dict) -> JsonResponse:
    """POST with a JSON body (the client), or GET with the query string (MLflow's server
    answers both): a lone `order_by` then arrives as a string, not a list."""
    attributes = ("name", "creation_time", "last_update_time", "experiment_id")
    numeric = ("creation_time", "last_update_time")
    clauses = search.parse_filter(text(data, "filter", limit=5000), attributes, numeric)
    if isinstance(data.get("order_by"), str):
        data = {**data, "order_by": [data["order_by"]]}
    orders = search.parse_order(list_param(data, "order_by"), attributes) or [
        ("attributes", "last_update_time", True)
    ]
    stages = _view_type(data, "view_type")
    limit = integer(
        data, "max_results", default=DEFAULT_SEARCH_RESULTS, low=1, high=MAX_SEARCH_RESULTS
    )
    offset = page_offset(data)

    records = [reads.experiment_json(e, user) for e in Experiment.objects.select_related("owner")]
    if store.default_experiment(user, create=False) is None:  # "0" exists for every user
        records.append(reads.unmade_default_json())

    def get(record: dict, kind: str, name: str) -> Any:
        if kind == "tags":
            return next((t["value"] for t in record["tags"] if t["key"] == name), None)
        if kind == "attributes":
            return record.get(name)
        return None

    records = [r for r in records if r["lifecycle_stage"] in stages]
    found = [r for r in records if search.matches(clauses, lambda k, n, r=r: get(r, k, n))]
    found = search.order(found, orders, get)
    page = found[offset : offset + limit]
    body: dict[str, Any] = {"experiments": page}
    if offset + limit < len(found):
        body["next_page_token"] = page_token(offset + limit)
    return _ok(proto_shape(body))


@mlflow_view("POST")
def experiment_update(request: HttpRequest, user, data: dict) -> JsonResponse:
    experiment = _managed_experiment(user, data)
    new_name = text(data, "new_name", required=True, limit=200)
    if not new_name.strip():
        raise MlflowError(INVALID, "An experiment name must not be blank.")
    store.rename_experiment(experiment, new_name)
    return _ok()


@mlflow_view("POST")
def experiment_delete(request: HttpRequest, user, data: dict) -> JsonResponse:
    store.delete_experiment(_managed_experiment(user, data, active=False))
    return _ok()


@mlflow_view("POST")
def experiment_restore(request: HttpRequest, user, data: dict) -> JsonResponse:
    store.restore_experiment(_managed_experiment(user, data, active=False))
    return _ok()


@mlflow_view("POST")
def experiment_set_tag(request: HttpRequest, user, data: dict) -> JsonResponse:
    experiment = _managed_experiment(user, data)
    tags = store.checked_experiment_tags([data])
    for key, value in tags.items():
        store.set_experiment_tag(experiment, key, value)
    return _ok()


def _managed_experiment(user, data: dict, *, active: bool = True) -> Experiment:
    raw = text(data, "experiment_id", required=True, limit=20)
    experiment = store.find_experiment(user, raw, manage=True, active=active)
    assert experiment is not None  # manage makes "0"
    return experiment


# --- runs ----------------------------------------------------------------------------------------


@mlflow_view("POST")
def run_create(request: HttpRequest, user, data: dict) -> JsonResponse:
    experiment = store.find_experiment(
        user, text(data, "experiment_id", limit=20) or "0", manage=True
    )
    tags = store.checked_tags(list_param(data, "tags"))
    run = store.create_run(
        user,
        experiment,
        name=text(data, "run_name", limit=200),
        start_time=integer(data, "start_time"),
        tags=tags,
        user_id=text(data, "user_id", limit=200),
    )
    return _ok({"run": reads.runs_json([run], user)[0]})


@mlflow_view("GET")
def run_get(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data))
    return _ok({"run": reads.runs_json([run], user)[0]})


@mlflow_view("POST")
def run_update(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    status = data.get("status")
    if isinstance(status, int) and not isinstance(status, bool):  # the enum's number
        status = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}.get(status)
    if status is not None and not isinstance(status, str):
        raise MlflowError(INVALID, f"Status must be a run status name, not {status!r}.")
    run = store.update_run(
        run,
        status=status,
        end_time=integer(data, "end_time"),
        name=text(data, "run_name", limit=200),
    )
    return _ok({"run_info": reads.runs_json([run], user)[0]["info"]})


def _point(entry: Any, where: str) -> Point:
    if not isinstance(entry, dict):
        raise MlflowError(INVALID, f"{where} must be an object {{key, value, timestamp, step}}.")
    key = entity_name("metric", entry.get("key"), limit=store.METRIC_KEY_LIMIT)
    where = f"{where} ('{key}')"
    try:
        step = integer(entry, "step", default=0, low=STEP_MIN, high=STEP_MAX)
        timestamp = integer(entry, "timestamp", default=None, low=0, high=INT64_MAX)
    except MlflowError as exc:
        raise MlflowError(INVALID, f"{where}: {exc.message}") from None
    if "value" not in entry:
        raise MlflowError(INVALID, f"{where}: missing value.")
    # A timestamp the client sent is kept as sent, 0 too (MLflow keeps it); none is "now".
    stamp = store.now_ms() if timestamp is None else timestamp
    return Point(key, number(entry["value"], where), stamp, step)


def _points(entries: list) -> list[Point]:
    """The batch's metrics, checked. The common shape (a known-good key, int step and
    timestamp, finite float value) takes a fast path: a batch holds ~1,000 of them, and the
    full checks of `_point` would cost more than storing them."""
    good_keys: set[str] = set()
    points = []
    for i, entry in enumerate(entries):
        if type(entry) is dict:
            key, step, stamp, value = (
                entry.get("key"),
                entry.get("step", 0),
                entry.get("timestamp"),
                entry.get("value"),
            )
            if (
                type(step) is int
                and STEP_MIN <= step <= STEP_MAX
                and type(stamp) is int
                and 0 <= stamp <= INT64_MAX
                and type(value) is float
                and math.isfinite(value)
                and (key in good_keys if type(key) is str else False)
            ):
                points.append(Point(key, value, stamp, step))
                continue
        point = _point(entry, f"metrics[{i}]")
        good_keys.add(point.key)
        points.append(point)
    return points


@mlflow_view("POST")
def log_batch(request: HttpRequest, user, data: dict) -> JsonResponse:
    raw_metrics, raw_params, raw_tags = (
        list_param(data, "metrics"),
        list_param(data, "params"),
        list_param(data, "tags"),
    )
    store.check_limits(len(raw_metrics), len(raw_params), len(raw_tags))
    run = store.find_run(user, run_id(data), manage=True)
    points = _points(raw_metrics)
    linked = [
        (points[i], link)
        for i, entry in enumerate(raw_metrics)
        if type(entry) is dict and (link := logged_models.model_link(entry, f"metrics[{i}]"))
    ]
    params, tags = store.checked_params(raw_params), store.checked_tags(raw_tags)
    with transaction.atomic():  # a metric naming a model it may not reach stores nothing
        store.log_batch(run, points, params, tags)
        if linked:
            logged_models.add_metrics(user, run, linked)
    return _ok()


@mlflow_view("POST")
def log_metric(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    point = _point(data, "metric")
    link = logged_models.model_link(data, "metric")
    with transaction.atomic():
        store.log_batch(run, [point], {}, {})
        if link:
            logged_models.add_metrics(user, run, [(point, link)])
    return _ok()


@mlflow_view("POST")
def log_parameter(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    store.log_batch(run, [], store.checked_params([data]), {})
    return _ok()


@mlflow_view("POST")
def set_tag(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    store.log_batch(run, [], {}, store.checked_tags([data]))
    return _ok()


@mlflow_view("POST")
def run_delete(request: HttpRequest, user, data: dict) -> JsonResponse:
    """MLflow's soft delete: the run stays, "deleted", until restored or purged."""
    store.delete_run(store.find_run(user, run_id(data), manage=True, active=False))
    return _ok()


@mlflow_view("POST")
def run_restore(request: HttpRequest, user, data: dict) -> JsonResponse:
    store.restore_run(store.find_run(user, run_id(data), manage=True, active=False))
    return _ok()


@mlflow_view("POST")
def delete_tag(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    store.delete_tag(run, entity_name("tag", data.get("key")))
    return _ok()


@mlflow_view("POST")
def log_inputs(request: HttpRequest, user, data: dict) -> JsonResponse:
    run = store.find_run(user, run_id(data), manage=True)
    store.tracked_of(run)
    store.log_inputs(run, store.checked_inputs(list_param(data, "datasets")))
    return _ok()


@mlflow_view("POST")
def run_search(request: HttpRequest, user, data: dict) -> JsonResponse:
    attributes = ("run_name", "status", "run_id", "start_time", "end_time", "user_id")
    numeric = ("start_time", "end_time")
    clauses = search.parse_filter(text(data, "filter", limit=5000), attributes, numeric)
    orders = search.parse_order(list_param(data, "order_by"), attributes) or [
        ("attributes", "start_time", True)
    ]
    limit = integer(
        data, "max_results", default=DEFAULT_SEARCH_RESULTS, low=1, high=MAX_SEARCH_RESULTS
    )
    offset = page_offset(data)
    stages = _view_type(data, "run_view_type")

    experiment_ids = []
    for raw in list_param(data, "experiment_ids"):
        experiment = store.find_experiment(user, str(raw))
        if experiment is not None:
            experiment_ids.append(experiment.id)
    runs = list(
        Run.objects.filter(experiment_id__in=experiment_ids)
        .select_related("experiment", "tracked")
        .order_by("id")
    )
    # The latest metrics are the costly read (runs × keys rows): to filter and sort, only the
    # keys the clauses and orders name; every key only for the returned page.
    named = {c.name for c in clauses if c.kind == "metrics"}
    named |= {name for kind, name, _ in orders if kind == "metrics"}
    records = reads.runs_json(runs, user, metric_keys=named)
    pairs = [(run, r) for run, r in zip(runs, records) if r["info"]["lifecycle_stage"] in stages]

    def get(record: dict, kind: str, name: str) -> Any:
        if kind == "attributes":
            return record["info"].get(name)
        entries = record["data"][kind]
        found = next((e["value"] for e in entries if e["key"] == name), None)
        if kind != "metrics" or not isinstance(found, str):
            return found
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(found, found)

    found = [p for p in pairs if search.matches(clauses, lambda k, n, r=p[1]: get(r, k, n))]
    found = search.order(found, orders, lambda p, kind, name: get(p[1], kind, name))
    chosen = found[offset : offset + limit]
    page = reads.runs_json([run for run, _ in chosen], user)
    body: dict[str, Any] = {"runs": page}
    if offset + limit < len(found):
        body["next_page_token"] = page_token(offset + limit)
    return _ok(proto_shape(body))


@mlflow_view("GET")
def metric_history(request: HttpRequest, user, data: dict) -> HttpResponse:
    """A series' points in step order, `max_results` a page. The page token holds the step
    the next page starts at, and how many of that step's points the last page took already
    (a step holds several points where the client logged it several times)."""
    run = store.find_run(user, run_id(data))
    key = text(data, "metric_key", required=True, limit=store.METRIC_KEY_LIMIT)
    limit = integer(data, "max_results", default=None, low=1, high=INT64_MAX)
    start, skip = _history_position(data)
    if store.is_alias(run, key):  # Troupe's copy, not a key the client logged
        return _ok()
    if not has_earlier(run.id, key):  # one point a step: the fast path, in SQL
        listed, following = history_json(run.id, key, start, limit)
        if listed == "[]" and following is None:
            return _ok()  # MLflow's answer for a series with nothing (more) in it
        token = "" if following is None else f', "next_page_token": "{page_token(following)}"'
        return HttpResponse(f'{{"metrics": {listed}{token}}}', content_type="application/json")
    points = every_point_json(run.id, key, history_json(run.id, key, STEP_MIN, None)[0])
    first = next((i for i, p in enumerate(points) if p["step"] >= start), len(points))
    first += skip if first < len(points) and points[first]["step"] == start else 0
    end = len(points) if limit is None else first + limit
    body: dict[str, Any] = {"metrics": points[first:end]}
    if end < len(points):
        step = points[end]["step"]
        taken = sum(1 for p in points[first:end] if p["step"] == step)
        if step == start:
            taken += skip
        body["next_page_token"] = page_token(step, taken)
    return _ok(proto_shape(body))


def _history_position(data: dict) -> tuple[int, int]:
    """(first step, points of it to skip) of a get-history page: from its token, else all."""
    raw = data.get("page_token")
    if not raw:
        return STEP_MIN, 0
    try:
        token = json.loads(base64.urlsafe_b64decode(str(raw).encode()))
        step, skip = token["offset"], token.get("skip", 0)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise MlflowError(INVALID, f"Invalid page token {raw!r}.") from None
    for value in (step, skip):
        if isinstance(value, bool) or not isinstance(value, int):
            raise MlflowError(INVALID, f"Invalid page token {raw!r}.")
    if not STEP_MIN <= step <= STEP_MAX or skip < 0:
        raise MlflowError(INVALID, f"Invalid page token {raw!r}.")
    return step, skip


# --- everything else -----------------------------------------------------------------------------


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any other path of MLflow's APIs (/api/2.0/mlflow/…, /api/3.0/mlflow/…, the UI's
    /ajax-api/…): MLflow's JSON error, never an HTML page."""
    return error_response(
        "ENDPOINT_NOT_FOUND",
        f"Troupe does not implement the MLflow endpoint {request.method} {request.path} "
        "(it answers experiments/get-by-name, create, get, search, update, delete, restore, "
        "set-experiment-tag; runs/create, get, update, delete, restore, search, log-batch, "
        "log-metric, log-parameter, set-tag, delete-tag, log-inputs, outputs, log-model; "
        "metrics/get-history, get-history-bulk-interval; artifacts/list; logged-models).",
    )
