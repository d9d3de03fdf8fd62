"""The branching app: child runs from a kept checkpoint of a run, their form, page and API.
An app (no models of its own) for the run page's branch template tags."""

from django.apps import AppConfig


class BranchingConfig(AppConfig):
    name = "webapp.branching"
