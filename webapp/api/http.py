"""The JSON API's plumbing: authentication, errors as JSON, and reading request bodies.

`@api_view("GET", "POST")` wraps a view so that:
- a method it does not list gets 405 with an `Allow` header;
- the caller is authenticated by `Authorization: Bearer <token>` (tokens are stored hashed;
  such requests are exempt from CSRF, as no browser attaches the header by itself) or else by
  the session, whose unsafe requests must then pass Django's CSRF check; neither gives 401;
- `ApiError`, `Http404` and `PermissionDenied` become `{"error": …}` with 4xx statuses, so an
  API client never sees an HTML page.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from webapp.experiments.models import ApiToken, hash_token

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


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


def _token_user(request: HttpRequest):
    """The user of a bearer token; None when there is no Authorization header.

    Raises ApiError(401) for a malformed header or a token that does not exist (any more).
    """
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(401, "The Authorization header must be 'Bearer <token>'.")
    try:
        token = ApiToken.objects.select_related("user").get(digest=hash_token(raw.strip()))
    except ApiToken.DoesNotExist:
        token = None
    if token is None or not token.user.is_active:
        raise ApiError(401, "This API token is not valid (revoked, mistyped, or its user is off).")
    now = timezone.now()
    # At most one write a minute per token: ingestion sends many requests a second.
    if token.last_used is None or now - token.last_used > timedelta(minutes=1):
        ApiToken.objects.filter(id=token.id).update(last_used=now)
    return token.user


def _authenticate(request: HttpRequest) -> None:
    user = _token_user(request)
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
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return error_response(exc.status, exc.message, exc.fields)
            except Http404 as exc:
                return error_response(404, str(exc) or "Not found.")
            except PermissionDenied as exc:
                return error_response(403, str(exc) or "You may not do this.")

        return wrapper

    return decorate


def read_json(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object; ApiError 413 when too big, 400 when not an object."""
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
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.")
    return data
