"""The metric store as a Django app: it owns the tables beside the metric points (`models.py`)."""

from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "webapp.metrics"
    label = "metrics"
    default_auto_field = "django.db.models.BigAutoField"
