"""The signed-in home page and the account page."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.env import redact_url
from webapp.experiments.token_views import pop_new_token


def _services() -> dict[str, str]:
    """Where this instance keeps its data and queues its work, shown on the home page so that
    nobody wonders whether they are looking at the embedded default or the real services."""
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        database = f"SQLite, {db['NAME']}"
    else:
        database = f"PostgreSQL, {db['NAME']} on {db['HOST']}:{db['PORT'] or 5432}"
    if settings.CELERY_BROKER_URL.startswith("filesystem:"):
        broker = f"Embedded (folders under {settings.DATA_DIR / 'broker'})"
    else:
        broker = f"Redis, {redact_url(settings.CELERY_BROKER_URL)}"
    return {"database": database, "broker": broker, "data_dir": str(settings.DATA_DIR)}


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/home.html", {"services": _services()})


@login_required
def account(request: HttpRequest) -> HttpResponse:
    context = {"tokens": request.user.api_tokens.all(), "new_token": pop_new_token(request)}
    return render(request, "accounts/account.html", context)
