"""The episodes app: what the agents said, recorded by the trainer, stored per run."""

from django.apps import AppConfig


class EpisodesConfig(AppConfig):
    name = "webapp.episodes"
    default_auto_field = "django.db.models.BigAutoField"
