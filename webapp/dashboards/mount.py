"""The Dash panel beside Django in one WSGI application, behind Django's own login.

`mount_dash(django_app)` returns werkzeug's DispatcherMiddleware: /dash/… goes to the Dash
(Flask) app, everything else to Django. It sets the Dash app up first (`set_up_now`), so the
first requests cannot race Dash's lazy setup. Dash never sees a request Django would refuse:
`LoginRequired` builds a Django request from the WSGI environ and runs what Django's
middleware would for a view behind `@login_required` —

- the session (`SessionStore` from the session cookie) and the user (`auth.get_user`, which
  also checks the session against the user's password hash, so signing out or changing the
  password elsewhere ends panel access too);
- an anonymous visitor is redirected to the login page with `?next=` the panel URL (a
  callback request, which cannot follow a redirect, gets 403 and the page says to reload);
- CSRF: Dash's callbacks are POSTs, checked by Django's CsrfViewMiddleware against the
  X-CSRFToken header the Dash renderer copies from Django's CSRF cookie (the cookie is set on
  the first page load when missing).

Every /dash/ response, the panel's and the redirects and refusals above alike, carries the
headers Django's SecurityMiddleware and XFrameOptionsMiddleware give Django's pages
(X-Frame-Options, X-Content-Type-Options: nosniff, Referrer-Policy,
Cross-Origin-Opener-Policy, and HSTS when configured): the panel's HTML must not be framed by
another site any more than the Django pages may.

Around each request it sends Django's request_started / request_finished signals, as
Django's own handler does, so database connections are recycled by CONN_MAX_AGE and health
checks exactly as for Django views; and it tells the panel's data layer who is looking
(`data.viewing_as`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.views import redirect_to_login
from django.core import signals
from django.core.exceptions import SuspiciousOperation
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseForbidden
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.middleware.security import SecurityMiddleware
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wsgi import ClosingIterator

from webapp.dashboards import data

PREFIX = "/dash"


def mount_dash(django_app: Callable) -> DispatcherMiddleware:
    """Django at /, the panel at /dash/ behind the login."""
    from webapp.dashboards.app import app as dash_app  # needs Django set up: import late

    set_up_now(dash_app)
    return DispatcherMiddleware(django_app, {PREFIX: LoginRequired(dash_app.server)})


def set_up_now(dash_app) -> None:
    """Run Dash's one-time setup (its script tags, callbacks and page router) here, in the one
    thread that builds the WSGI application, before any request. Dash runs it in the first
    request's `before_request` hooks and marks it done as it starts, so under gunicorn's
    threads a second first request raced it: that page's scripts came from a half-built
    registry and it stayed at "Loading…" with `DashRenderer is not defined`. Once done,
    every page is served the same scripts in the same order. Nothing is read from the
    database: with no viewer, the pages' layouts list nothing."""
    with dash_app.server.test_request_context("/"):
        dash_app.server.preprocess_request()


def _dash_view(request):  # CsrfViewMiddleware checks a view; this one stands for all of Dash
    raise NotImplementedError


class LoginRequired:
    """WSGI middleware: pass signed-in users to `app`, send everyone else to the login page."""

    def __init__(self, app: Callable):
        self.app = app
        self.session_store = import_module(settings.SESSION_ENGINE).SessionStore

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        signals.request_started.send(sender=self.__class__, environ=environ)
        try:
            body = self._respond(environ, start_response)
        except BaseException:
            signals.request_finished.send(sender=self.__class__)
            raise
        return ClosingIterator(body, [self._finished])

    def _finished(self) -> None:
        signals.request_finished.send(sender=self.__class__)

    def _respond(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        request = WSGIRequest(environ)
        secure = _security_headers(request)

        def start_secured(status, headers, exc_info=None):
            have = {name.lower() for name, _ in headers}
            added = [(name, value) for name, value in secure if name.lower() not in have]
            return start_response(status, list(headers) + added, exc_info)

        return self._respond_checked(request, environ, start_secured)

    def _respond_checked(
        self, request: WSGIRequest, environ: dict, start_response: Callable
    ) -> Iterable[bytes]:
        try:
            request.session = self.session_store(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
            user = get_user(request)
            if not user.is_authenticated:
                if request.method in ("GET", "HEAD"):
                    return _send(redirect_to_login(request.get_full_path()), start_response)
                return _send(
                    HttpResponseForbidden("Your session has ended: reload the page to sign in."),
                    start_response,
                )
            csrf = CsrfViewMiddleware(lambda r: HttpResponse())
            csrf.process_request(request)
            rejection = csrf.process_view(request, _dash_view, (), {})
            if rejection is not None:
                return _send(rejection, start_response)
            cookies = []
            if request.method == "GET" and settings.CSRF_COOKIE_NAME not in request.COOKIES:
                get_token(request)  # the renderer needs the cookie to sign its callbacks
                cookies = _cookie_headers(csrf.process_response(request, HttpResponse()))
        except SuspiciousOperation as exc:  # e.g. a Host header not in ALLOWED_HOSTS
            return _send(HttpResponseBadRequest(str(exc)), start_response)

        def start_with_cookies(status, headers, exc_info=None):
            return start_response(status, list(headers) + cookies, exc_info)

        with data.viewing_as(user):
            # Dash computes the whole response inside this call (no streaming), so the viewer
            # is set for every query its callbacks make.
            return self.app(environ, start_with_cookies)


def _security_headers(request: WSGIRequest) -> list[tuple[str, str]]:
    """The headers Django's security middlewares add to a response for this request."""
    response = HttpResponse()
    before = set(response.headers)
    response = SecurityMiddleware(lambda r: response).process_response(request, response)
    response = XFrameOptionsMiddleware(lambda r: response).process_response(request, response)
    return [(name, value) for name, value in response.items() if name not in before]


def _cookie_headers(response: HttpResponse) -> list[tuple[str, str]]:
    return [("Set-Cookie", c.output(header="")) for c in response.cookies.values()]


def _send(response: HttpResponse, start_response: Callable) -> list[bytes]:
    """A Django response as a WSGI one (what Django's own WSGIHandler does)."""
    start_response(
        f"{response.status_code} {response.reason_phrase}",
        [*response.items(), *_cookie_headers(response)],
    )
    return [response.content]
