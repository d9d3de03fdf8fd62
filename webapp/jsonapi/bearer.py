"""The one bearer-token authenticator, shared by the JSON API and the MLflow endpoint.

Both read `Authorization: Bearer <token>`, find the token by its SHA-256 and its user in one
query (`webapp.metrics.lookups.token_and_user`: every MLflow request makes it, and the ORM's
query compilation would cost as much as the round trip), and note when the token was last used at
most once a minute, since ingestion sends many requests a second. That query is the request's
first, so it also stands in for Django's per-request connection health check, and a look-up
the request needs besides (a `Rider`: an artifact upload's run) rides along in it. Each caller
words the errors in its own protocol's shape.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from webapp.experiments.models import ApiToken, hash_token
from webapp.metrics.lookups import Rider, token_and_user

LAST_USED_EVERY = timedelta(minutes=1)


class MalformedHeader(Exception):
    """The Authorization header is not `Bearer <token>`."""


class InvalidToken(Exception):
    """No such token (revoked or mistyped), or its user is off."""


def bearer_user(header: str | None, rider: Rider | None = None):
    """The active user of the token in `header`; None when there is no header at all. With a
    `rider`, its look-up rides along in the same query (its `result`, once `done`)."""
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise MalformedHeader("The Authorization header must be 'Bearer <token>'.")
    found = token_and_user(hash_token(raw.strip()), rider)
    if found is None:
        raise InvalidToken("This API token is not valid (revoked, mistyped, or its user is off).")
    token, user = found
    if not user.is_active:
        raise InvalidToken("This API token is not valid (revoked, mistyped, or its user is off).")
    now = timezone.now()
    if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
        ApiToken.objects.filter(id=token.id).update(last_used=now)
    return user
