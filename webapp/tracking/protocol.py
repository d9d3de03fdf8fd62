"""MLflow's REST plumbing: errors in its shape, bearer-token authentication, request fields.

`@mlflow_view("POST")` wraps an endpoint so that:
- the caller is the user of `Authorization: Bearer <token>` (Troupe's API tokens; the MLflow
  client sends `MLFLOW_TRACKING_TOKEN` so); none or a bad one is 401 `UNAUTHENTICATED`;
- GET endpoints read their fields from the query string (where the client puts them), POST
  endpoints from a JSON body (read by the JSON API's own reader: size, nesting, NUL checks);
- every failure is `{"error_code": …, "message": …, "sqlstate": …, "error_class": …}` as
  MLflow 3.17's server sends it, with the status it gives that code, never an HTML page.
  The client retries 429 and 5xx for minutes, so input errors must never be answered with
  those.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from webapp.jsonapi.bearer import InvalidToken, MalformedHeader, bearer_user
from webapp.jsonapi.http import BUSY_MESSAGE, BUSY_RETRY_AFTER, ApiError, database_busy, read_json
from webapp.metrics.lookups import Rider

log = logging.getLogger(__name__)

INVALID = "INVALID_PARAMETER_VALUE"
MISSING = "RESOURCE_DOES_NOT_EXIST"
EXISTS = "RESOURCE_ALREADY_EXISTS"
DENIED = "PERMISSION_DENIED"
BUSY = "TEMPORARILY_UNAVAILABLE"
STATUS = {
    INVALID: 400,
    EXISTS: 400,
    "BAD_REQUEST": 400,
    "INVALID_STATE": 400,
    "UNAUTHENTICATED": 401,
    DENIED: 403,
    MISSING: 404,
    "ENDPOINT_NOT_FOUND": 404,
    "INTERNAL_ERROR": 500,
    BUSY: 503,
}
INT64_MAX = 2**63 - 1
# MLflow's rule for metric, param and tag names: letters, digits, _ - . / space and colon.
_NAME = re.compile(r"^[\w\-./ :]+$")


class MlflowError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# What MLflow's server (3.17) adds to an error beside its code: the class and SQLSTATE its
# `MlflowException` derives from the code (`mlflow/error_classification.py`). An error code
# it has no class for (UNAUTHENTICATED) goes without either, as there.
CLASSES = {
    INVALID: ("INVALID_PARAMETER_VALUE", "KAM00"),
    EXISTS: ("RESOURCE_ALREADY_EXISTS", "KAM00"),
    "BAD_REQUEST": ("INVALID_PARAMETER_VALUE", "KAM00"),
    "INVALID_STATE": ("CLIENT_INTERNAL_ERROR", "XXM00"),
    DENIED: ("PERMISSION_DENIED", "KAM00"),
    MISSING: ("RESOURCE_NOT_FOUND", "KAM00"),
    "ENDPOINT_NOT_FOUND": ("RESOURCE_NOT_FOUND", "KAM00"),
    "INTERNAL_ERROR": ("CLIENT_INTERNAL_ERROR", "XXM00"),
    BUSY: ("CLIENT_INTERNAL_ERROR", "XXM00"),
}


def error_response(code: str, message: str) -> JsonResponse:
    body = {"error_code": code, "message": message}
    if code in CLASSES:  # MLflow's order: sqlstate, then error_class
        body["sqlstate"], body["error_class"] = CLASSES[code][1], CLASSES[code][0]
    response = JsonResponse(body, status=STATUS[code])
    if code == "UNAUTHENTICATED":
        response["WWW-Authenticate"] = 'Bearer realm="troupe"'
    return response


def _token_user(request: HttpRequest, rider: Rider | None = None):
    try:
        user = bearer_user(request.headers.get("Authorization"), rider)
    except MalformedHeader:
        user = None
    except InvalidToken as exc:
        raise MlflowError("UNAUTHENTICATED", str(exc)) from None
    if user is None:
        raise MlflowError(
            "UNAUTHENTICATED",
            "Send a Troupe API token: set MLFLOW_TRACKING_TOKEN (make one on your account page "
            "or with `manage.py create_token <user>`).",
        )
    return user


def request_data(request: HttpRequest) -> dict[str, Any]:
    """The request's fields: the query string of a GET or DELETE (lists where a name repeats),
    the JSON body of a POST; none for a PUT (its body is an artifact's bytes)."""
    if request.method == "PUT":
        return {}
    if request.method in ("GET", "DELETE"):
        for name, values in request.GET.lists():
            _no_nul(name, *values)
        return {
            name: values if len(values) > 1 else values[0] for name, values in request.GET.lists()
        }
    try:
        return read_json(request)
    except ApiError as exc:
        detail = "; ".join(f"{k}: {v}" for k, v in exc.fields.items())
        raise MlflowError(INVALID, exc.message + (f" ({detail})" if detail else "")) from None


def _no_nul(name: str, *values: str) -> None:
    """No text with a NUL reaches the database (PostgreSQL refuses it with an error that
    would read as the server's fault); MLflow answers such a request 400 too."""
    if "\x00" in name or any("\x00" in value for value in values):
        raise MlflowError(INVALID, f"Parameter {name!r} holds a NUL character.")


def mlflow_view(*methods: str, rider: Callable[[dict], Rider | None] | None = None) -> Callable:
    """`rider`: from the path's parts, a look-up to send in the token's query
    (`webapp.jsonapi.bearer.Rider`), handed to the view as `request.mlflow_rider`."""

    def decorate(view: Callable) -> Callable:
        @csrf_exempt  # bearer tokens only: no browser attaches one by itself
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                allowed = ", ".join(methods)
                response = error_response(
                    "ENDPOINT_NOT_FOUND", f"{request.path} takes {allowed}, not {request.method}."
                )
                response["Allow"] = allowed
                return response
            try:
                ride = rider(kwargs) if rider else None
                request.mlflow_rider = ride  # type: ignore[attr-defined]
                user = _token_user(request, ride)
                for name, value in kwargs.items():  # the path's parts
                    _no_nul(name, value)
                return view(request, user, request_data(request), *args, **kwargs)
            except MlflowError as exc:
                return error_response(exc.code, exc.message)
            except Http404 as exc:
                return error_response(MISSING, str(exc) or "Not found.")
            except PermissionDenied as exc:
                return error_response(DENIED, str(exc) or "You may not do this.")
            except OperationalError as exc:
                if database_busy(exc):  # MLflow's clients retry a 503 with back-off
                    log.warning("Database busy: %s %s answered 503", request.method, request.path)
                    response = error_response(BUSY, BUSY_MESSAGE)
                    response["Retry-After"] = str(BUSY_RETRY_AFTER)
                    return response
                log.exception("MLflow endpoint error: %s %s", request.method, request.path)
                return error_response(
                    "INTERNAL_ERROR", "The server failed; the error is in its log."
                )
            except Exception:
                log.exception("MLflow endpoint error: %s %s", request.method, request.path)
                return error_response(
                    "INTERNAL_ERROR", "The server failed; the error is in its log."
                )

        return wrapper

    return decorate


# --- fields ------------------------------------------------------------------------------------


def text(data: dict, name: str, *, required: bool = False, limit: int = 500) -> str:
    value = data.get(name)
    if value is None or value == "":
        if required:
            raise MlflowError(INVALID, f"Missing value for required parameter '{name}'.")
        return ""
    if not isinstance(value, str):
        raise MlflowError(INVALID, f"Parameter '{name}' must be a string, not {value!r}.")
    if len(value) > limit:
        raise MlflowError(INVALID, f"Parameter '{name}' is longer than {limit} characters.")
    return value


def integer(
    data: dict, name: str, *, default: int | None = None, low: int = 0, high: int = INT64_MAX
) -> int | None:
    """A whole number: JSON number or decimal string (protobuf's JSON spells int64 as either)."""
    value = data.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MlflowError(
            INVALID,
            f"Parameter '{name}' must be a whole number from {low} to {high}, "
            f"not {data.get(name)!r}.",
        )
    return value


def run_id(data: dict) -> str:
    """The run named by `run_id` (or the older `run_uuid`)."""
    value = data.get("run_id") or data.get("run_uuid")
    if not value:
        raise MlflowError(INVALID, "Missing value for required parameter 'run_id'.")
    if not isinstance(value, str) or len(value) > 64:
        raise MlflowError(INVALID, f"Parameter 'run_id' must be a run id, not {value!r}.")
    return value


def entity_name(kind: str, name: Any, limit: int = 250) -> str:
    """A metric, param or tag name, checked by MLflow's rule (and Troupe's column size)."""
    if not isinstance(name, str) or not name:
        raise MlflowError(INVALID, f"A {kind} needs a non-empty string key, not {name!r}.")
    if len(name) > limit:
        raise MlflowError(
            INVALID, f"{kind.capitalize()} key '{name[:60]}…' is longer than {limit} characters."
        )
    if not _NAME.match(name) or name.startswith("/") or ".." in name.split("/"):
        raise MlflowError(
            INVALID,
            f"Invalid {kind} key {name!r}: keys may hold only letters, digits, underscores, "
            "dashes, periods, spaces, colons and slashes, and may not start with '/' or hold "
            "a '..' part.",
        )
    return name


def number(value: Any, where: str) -> float:
    """A metric value: a JSON number, or a numeric string (protobuf JSON spells NaN and ±inf
    "NaN", "Infinity", "-Infinity"). Non-finite values are taken, as MLflow's server takes
    them: stored as a gap (`webapp.metrics.finite_or_none`), read back as NaN, or as
    ±inf where one was logged (`webapp/metrics/models.PointSign`)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise MlflowError(INVALID, f"{where}: value {value!r} is not a number.") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MlflowError(INVALID, f"{where}: value {value!r} is not a number.")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float
        return math.inf if value > 0 else -math.inf


# --- paging and list parameters, shared by every search endpoint ---------------------------------


def proto_shape(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as MLflow's server writes it (`message_to_json`): an empty list is a repeated
    field with nothing in it, which protobuf's JSON leaves out, so a search that finds
    nothing answers `{}`, not `{"runs": []}`."""
    return {name: value for name, value in body.items() if value != []}


def list_param(data: dict, name: str) -> list:
    """The list parameter `name` of a request body (absent: an empty list)."""
    value = data.get(name) or []
    if not isinstance(value, list):
        raise MlflowError(INVALID, f"Parameter '{name}' must be a list.")
    return value


def page_token(offset: int, skip: int = 0) -> str:
    """The opaque `next_page_token` of a paged answer that goes on at `offset`."""
    fields = {"offset": offset, "skip": skip} if skip else {"offset": offset}
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()


def page_offset(data: dict) -> int:
    """Where a paged request starts: the offset in its `page_token` (none: 0)."""
    raw = data.get("page_token")
    if not raw:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(raw).encode()))["offset"]
    except (ValueError, KeyError, TypeError):
        raise MlflowError(INVALID, f"Invalid page token {raw!r}.") from None
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise MlflowError(INVALID, f"Invalid page token {raw!r}.")
    return offset
