"""The statistics app: an experiment's statistics across seeds, its page and JSON, and queueing
more seeds. An app (no models of its own) for its template filters."""

from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "webapp.stats"
