"""The tracking app: MLflow's REST protocol over Troupe's experiments, runs and metrics."""

from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "webapp.tracking"
    label = "tracking"
    default_auto_field = "django.db.models.BigAutoField"
