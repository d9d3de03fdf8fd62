"""The authentication backend: Django's ModelBackend behind the sign-in throttle
(webapp/accounts/throttle.py).

A refused attempt raises PermissionDenied, which makes `authenticate()` return None at once
(no other backend, no password hash), and leaves the wait in `request.login_retry_after` so
the login page (or an API view) can answer 429 with Retry-After.
"""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from webapp.accounts import throttle


class ThrottledModelBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(self._username_field())
        if username is None or password is None:
            return None  # not a password sign-in (another backend's credentials)
        address = throttle.client_address(request)
        if wait := throttle.retry_after(username, address):
            if request is not None:
                request.login_retry_after = wait
            raise PermissionDenied("Too many failed sign-ins.")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            throttle.record_failure(username, address)
        else:
            throttle.record_success(username)
        return user

    def _username_field(self) -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD
