"""The experiments app: experiments, runs, metrics, API tokens, and their pages."""

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "webapp.experiments"
    default_auto_field = "django.db.models.BigAutoField"
