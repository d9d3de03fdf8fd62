"""Failed sign-ins, counted per account and per client address (webapp/accounts/throttle.py).

In the database, not a per-process cache, so that every gunicorn worker (and the embedded
SQLite default) counts the same failures.
"""

from __future__ import annotations

from django.db import models


class LoginFailures(models.Model):
    ACCOUNT, ADDRESS = "account", "address"
    SCOPES = [(ACCOUNT, ACCOUNT), (ADDRESS, ADDRESS)]

    scope = models.CharField(max_length=8, choices=SCOPES)
    # SHA-256 of the username (case-folded) or of the client address: fixed size whatever a
    # client sends, and no list of tried usernames in clear.
    key = models.CharField(max_length=64)
    failures = models.IntegerField(default=0)
    since = models.DateTimeField()  # the first failure of the current window

    class Meta:
        constraints = [
            # one counter per account or address: the upsert on each failure
            models.UniqueConstraint(fields=["scope", "key"], name="login_failures_unique"),
        ]
        indexes = [
            # the clean-up of windows that have passed: WHERE since < cutoff
            models.Index(fields=["since"], name="login_failures_since"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.key[:8]}…: {self.failures} since {self.since:%H:%M:%S}"
