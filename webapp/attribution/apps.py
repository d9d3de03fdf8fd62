"""The attribution app: mix-and-match evaluations of a run and which role made its gain."""

from django.apps import AppConfig


class AttributionConfig(AppConfig):
    name = "webapp.attribution"
    default_auto_field = "django.db.models.BigAutoField"
