"""Sign-in throttling: too many failed passwords for one account, or from one client
address, and further attempts are refused for the rest of the window — before the password
is hashed, so a loop of wrong passwords costs a query, not a PBKDF2 run, and other users'
requests are not starved of CPU.

- An account with TROUPE_LOGIN_MAX_FAILURES (5) failures within TROUPE_LOGIN_WINDOW_SECONDS
  (900) is locked until the window ends, even for the right password; a successful sign-in
  clears its count.
- An address with TROUPE_LOGIN_ADDRESS_MAX_FAILURES (20) failures within the window, over any
  usernames, is refused likewise (higher: colleagues behind one NAT share an address). A
  success does not clear it, so one valid account cannot launder guesses at others.

`webapp.accounts.backends.ThrottledModelBackend` applies this to every `authenticate()` call:
the login page, the admin's login, and any password-based API authentication that calls
`authenticate(request, username=…, password=…)`. The client address is REMOTE_ADDR (gunicorn
is not behind a proxy in Troupe's deployments; behind one, every client shares its address).
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from webapp.accounts.models import LoginFailures


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _keys(username: str | None, address: str | None) -> list[tuple[str, str, int]]:
    """(scope, key, limit) of each counter this attempt falls under."""
    keys = []
    if username:
        keys.append(
            (
                LoginFailures.ACCOUNT,
                _digest(username.casefold()),
                settings.TROUPE_LOGIN_MAX_FAILURES,
            )
        )
    if address:
        keys.append(
            (LoginFailures.ADDRESS, _digest(address), settings.TROUPE_LOGIN_ADDRESS_MAX_FAILURES)
        )
    return keys


def client_address(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def retry_after(username: str | None, address: str | None) -> int:
    """Seconds until this account and address may try again; 0 when they may now."""
    window = timedelta(seconds=settings.TROUPE_LOGIN_WINDOW_SECONDS)
    now = timezone.now()
    wait = 0
    for scope, key, limit in _keys(username, address):
        row = LoginFailures.objects.filter(scope=scope, key=key).values("failures", "since").first()
        if row and row["failures"] >= limit and row["since"] > now - window:
            wait = max(wait, int((row["since"] + window - now).total_seconds()) + 1)
    return wait


def record_failure(username: str | None, address: str | None) -> None:
    window = timedelta(seconds=settings.TROUPE_LOGIN_WINDOW_SECONDS)
    now = timezone.now()
    with transaction.atomic():
        for scope, key, _limit in _keys(username, address):
            row, created = LoginFailures.objects.select_for_update().get_or_create(
                scope=scope, key=key, defaults={"failures": 1, "since": now}
            )
            if created:
                continue
            if row.since <= now - window:  # the last window has passed: a new one starts
                row.failures, row.since = 1, now
            else:
                row.failures += 1
            row.save(update_fields=["failures", "since"])
        # Counters whose window has passed mean nothing any more.
        LoginFailures.objects.filter(since__lt=now - window).delete()


def record_success(username: str) -> None:
    LoginFailures.objects.filter(
        scope=LoginFailures.ACCOUNT, key=_digest(username.casefold())
    ).delete()
