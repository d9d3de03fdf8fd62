"""The login page (behind the sign-in throttle), the signed-in home page and the account
page."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.accounts.token_views import pop_new_token
from webapp.env import redact_url


def _services(staff: bool) -> dict[str, str]:
    """Where this instance keeps its data and queues its work, shown on the home page so that
    nobody wonders whether they are looking at the embedded default or the real services.
    Folders of the server only to staff: no user needs them (docs/security.md)."""
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        database = f"SQLite, {db['NAME']}" if staff else "SQLite (embedded)"
    else:
        database = f"PostgreSQL, {db['NAME']} on {db['HOST']}:{db['PORT'] or 5432}"
    if settings.CELERY_BROKER_URL.startswith("filesystem:"):
        where = f" (folders under {settings.DATA_DIR / 'broker'})" if staff else ""
        broker = f"Embedded{where}"
    else:
        broker = f"Redis, {redact_url(settings.CELERY_BROKER_URL)}"
    return {
        "database": database,
        "broker": broker,
        "data_dir": str(settings.DATA_DIR) if staff else "",
    }


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/home.html", {"services": _services(request.user.is_staff)})


@login_required
def account(request: HttpRequest) -> HttpResponse:
    context = {"tokens": request.user.api_tokens.all(), "new_token": pop_new_token(request)}
    return render(request, "accounts/account.html", context)


class LoginView(auth_views.LoginView):
    """Django's login page, answering 429 with Retry-After and a message saying how long to
    wait when the throttle refused the attempt (webapp/accounts/throttle.py)."""

    def form_invalid(self, form):
        response = super().form_invalid(form)
        wait = getattr(self.request, "login_retry_after", 0)
        if wait:
            response.status_code = 429
            response["Retry-After"] = str(wait)
        return response

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        wait = getattr(self.request, "login_retry_after", 0)
        context["retry_minutes"] = -(-wait // 60) if wait else 0
        return context


def sign_out(request: HttpRequest) -> HttpResponse:
    """A page with the sign-out button, for places that can only link (the Dash panel's
    header: signing out is a POST with Django's CSRF token, which the panel's frame has not)."""
    return render(request, "accounts/sign_out.html")
