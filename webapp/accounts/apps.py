"""Signing in, the home page and one's account page."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"

    def ready(self) -> None:
        from webapp.accounts import signals

        signals.connect()  # API tokens end with the password
