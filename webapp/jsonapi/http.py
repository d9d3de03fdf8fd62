"""The JSON API's plumbing: authentication, errors as JSON, and reading request bodies.

`@api_view("GET", "POST")` wraps a view so that:
- a method it does not list gets 405 with an `Allow` header;
- the caller is authenticated by `Authorization: Bearer <token>` (tokens are stored hashed;
  such requests are exempt from CSRF, as no browser attaches the header by itself) or else by
  the session, whose unsafe requests must then pass Django's CSRF check; neither gives 401;
- query parameters holding a NUL character get 400 naming the parameter;
- `ApiError`, `Http404` and `PermissionDenied` become `{"error": …}` with 4xx statuses, and
  any other exception is logged with its traceback and becomes a JSON 500, so an API client
  never sees an HTML page. `server_error` and `bad_request` (Django's handler500/400 in
  webapp/urls.py) answer JSON for every /api/ path that fails outside a view.

`read_json` is the one reader of request bodies: it refuses bodies over the size limit,
nested deeper than MAX_DEPTH, or holding strings PostgreSQL cannot store (NUL, lone
surrogates), naming where (`points[3].key`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from webapp.jsonapi.bearer import InvalidToken, MalformedHeader, bearer_user

log = logging.getLogger(__name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# Objects and arrays nested in one body. Troupe's own bodies nest 3 deep; Python's parser
# gives up near 1,000 with a RecursionError, and deep values only make every later step slow.
MAX_DEPTH = 32
NUL_MESSAGE = "must not contain NUL (\\u0000) characters"
SURROGATE_MESSAGE = "must not contain lone surrogates (\\ud800-\\udfff)"
# In a valid JSON body, NUL and surrogates can only be spelled as escapes: look for those in
# the raw bytes first, so that ordinary bodies (10,000 points) skip the walk over every string.
_RISKY_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
# The nesting of a valid JSON text, measured without a Python loop over its values (a walk
# over a 1,000-point body costs more than parsing it): keep only brackets, quotes and
# backslashes, drop the strings, then strip innermost bracket pairs one level a pass.
_STRUCTURE = {c: None for c in range(0x80) if chr(c) not in '[]{}"\\'}
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


# What a client is told when the embedded SQLite database stayed locked past its busy timeout
# (settings.py): a retryable 503, never a 500, since nothing of the request was stored.
BUSY_MESSAGE = (
    "The database is busy with other writers; nothing of this request was stored. Retry it "
    "(the embedded SQLite default takes one writer at a time: see README on when to use "
    "PostgreSQL)."
)
BUSY_RETRY_AFTER = 1  # seconds


def database_busy(exc: OperationalError) -> bool:
    """Whether `exc` is SQLite's "database is locked" (or busy): the writer waited its whole
    timeout for the lock. A retry succeeds once the other writers are done."""
    message = str(exc).lower()
    return "database is locked" in message or "database is busy" in message


UNAVAILABLE_MESSAGE = (
    "The database cannot be reached right now (restarting?); nothing of this request was "
    "stored. Retry it in a few seconds."
)
# SQLSTATEs of a server that went away: class 08 (connection exceptions) and the operator's
# shutdown, crash and "cannot connect now" (a PostgreSQL restart once answered 500).
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03")


def database_unavailable(exc: Exception) -> bool:
    """Whether `exc` says the database server went away or is not back yet (a restart), not
    that this request's query failed: a retry a few seconds later succeeds."""
    if isinstance(exc, InterfaceError):
        return True  # Django's "connection already closed"
    if not isinstance(exc, OperationalError):
        return False
    state = getattr(exc.__cause__, "sqlstate", None)
    if state is None:
        # No SQLSTATE: the client library failed to reach or keep the server ("connection
        # refused", "server closed the connection unexpectedly"), unless SQLite said busy.
        return not database_busy(exc) and exc.__cause__ is not None
    return state.startswith("08") or state in _UNAVAILABLE_STATES


def retry_later(request: HttpRequest, exc: Exception) -> JsonResponse | None:
    """The retryable 503 for a busy (SQLite) or unreachable database, or None for any other
    error (a 500)."""
    if database_busy(exc):
        message = BUSY_MESSAGE
    elif database_unavailable(exc):
        message = UNAVAILABLE_MESSAGE
    else:
        return None
    log.warning("Database busy or unreachable: %s %s answered 503", request.method, request.path)
    response = error_response(503, message)
    response["Retry-After"] = str(BUSY_RETRY_AFTER)
    return response


class ApiError(Exception):
    """An error answer: `status`, a message, and for 400 the bad fields {name: message}."""

    def __init__(self, status: int, message: str, fields: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = fields or {}


def error_response(status: int, message: str, fields: dict[str, str] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"error": message}
    if fields:
        body["fields"] = fields
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="troupe"'
    return response


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason  # the reason, not Django's HTML 403 page


def _csrf_problem(request: HttpRequest) -> str | None:
    check = _CsrfCheck(lambda r: HttpResponse())
    check.process_request(request)
    return check.process_view(request, None, (), {})


def _authenticate(request: HttpRequest) -> None:
    try:
        user = bearer_user(request.headers.get("Authorization"))
    except (MalformedHeader, InvalidToken) as exc:
        raise ApiError(401, str(exc)) from None
    if user is not None:
        request.user = user
        return
    if not request.user.is_authenticated:
        raise ApiError(
            401, "Sign in, or send 'Authorization: Bearer <token>' (see your account page)."
        )
    if request.method not in SAFE_METHODS and (reason := _csrf_problem(request)):
        raise ApiError(403, f"CSRF check failed ({reason}); scripts should use a bearer token.")


def api_view(*methods: str) -> Callable:
    def decorate(view: Callable) -> Callable:
        @csrf_exempt  # token requests need no CSRF; session requests are checked above
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                response = error_response(
                    405, f"{request.method} is not allowed here; use {' or '.join(methods)}."
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                _authenticate(request)
                _check_query(request)
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return error_response(exc.status, exc.message, exc.fields)
            except Http404 as exc:
                return error_response(404, str(exc) or "Not found.")
            except PermissionDenied as exc:
                return error_response(403, str(exc) or "You may not do this.")
            except (OperationalError, InterfaceError) as exc:
                response = retry_later(request, exc)
                if response is None:
                    log.exception("API error: %s %s", request.method, request.path)
                    return _server_error_response()
                return response
            except Exception:
                log.exception("API error: %s %s", request.method, request.path)
                return _server_error_response()

        return wrapper

    return decorate


def _server_error_response() -> JsonResponse:
    return error_response(500, "The server failed on this request; the error is in its log.")


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's handler500: JSON under /api/, Django's page elsewhere. Django has already
    logged the exception (the `django.request` logger, to stderr: settings.LOGGING)."""
    if request.path.startswith("/api/"):
        return _server_error_response()
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's handler400 (a Host not allowed, a malformed request): JSON under /api/."""
    if request.path.startswith("/api/"):
        return error_response(400, "Bad request: " + (str(exception) or "it cannot be read."))
    return defaults.bad_request(request, exception)


def _check_query(request: HttpRequest) -> None:
    """Query parameters reach SQL (`keys=`): NUL, which PostgreSQL cannot take, is a 400.
    (Percent-escaped surrogates cannot get through: Django decodes bad UTF-8 as U+FFFD.)"""
    bad = {
        name: NUL_MESSAGE
        for name, values in request.GET.lists()
        if "\x00" in name or any("\x00" in value for value in values)
    }
    if bad:
        raise ApiError(
            400, "Invalid query.", {name.replace("\x00", "\\u0000"): m for name, m in bad.items()}
        )


def _string_problem(text: str) -> str | None:
    found = _BAD_CHAR.search(text)
    if found is None:
        return None
    return NUL_MESSAGE if found.group() == "\x00" else SURROGATE_MESSAGE


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def check_tree(data: Any, *, strings: bool) -> None:
    """ApiError 400 when `data` nests deeper than MAX_DEPTH or (with `strings`) holds a key or
    string that PostgreSQL cannot store, naming the first such place."""
    stack: list[tuple[str, Any, int]] = [("", data, 1)]
    while stack:
        path, value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(
                400,
                f"The body is nested too deeply: at most {MAX_DEPTH} levels of objects and arrays.",
                {path or "body": f"nested more than {MAX_DEPTH} levels deep"},
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if strings and isinstance(key, str) and (problem := _string_problem(key)):
                raise ApiError(400, "Invalid request.", {path or "body": f"a key {problem}"})
            if isinstance(item, dict | list):
                stack.append((_path(path, key), item, depth + 1))
            elif strings and isinstance(item, str) and (problem := _string_problem(item)):
                raise ApiError(400, "Invalid request.", {_path(path, key): problem})


def _nested_deeper_than_limit(text: str) -> bool:
    """Whether valid JSON `text` nests more than MAX_DEPTH levels of objects and arrays."""
    reduced = text.translate(_STRUCTURE)
    # A string without brackets or escapes is now `""`. When removing those leaves no quote
    # (and there was no backslash), no string held a bracket: what is left is the structure.
    brackets = reduced.replace('""', "")
    if '"' in brackets or "\\" in brackets:
        brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))  # escapes need the full text
    for _ in range(MAX_DEPTH):
        if not brackets:
            return False
        brackets = _INNERMOST.sub("", brackets)
    return bool(brackets)


def read_json(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object; ApiError 413 when too big, 400 when not an object,
    nested too deeply, or holding a NUL or a lone surrogate (the field named)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if limit is not None and length > limit:
        raise ApiError(
            413, f"The body is {length} bytes; the limit is {limit}. Send smaller batches."
        )
    try:
        body = request.body
    except RequestDataTooBig:
        raise ApiError(
            413, f"The body is over the limit of {limit} bytes. Send smaller batches."
        ) from None
    try:
        data = json.loads(body or b"null")
    except RecursionError:
        raise ApiError(
            400, f"The body is nested too deeply: at most {MAX_DEPTH} levels of objects and arrays."
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.")
    # The walk names the place; ordinary bodies need neither of its checks and skip it.
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:  # UTF-16 or -32, which json.loads reads too: walk it all
        check_tree(data, strings=True)
        return data
    strings = _RISKY_ESCAPE.search(body) is not None
    if strings or _nested_deeper_than_limit(text):
        check_tree(data, strings=strings)
    return data
