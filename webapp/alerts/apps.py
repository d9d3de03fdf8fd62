"""The alerts app: the live radar's Celery task and the alerts it raises, their page and API.
An app (no models of its own: `Alert` is the experiments app's) for the radar's template tags."""

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "webapp.alerts"
