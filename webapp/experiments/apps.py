"""The experiments app: the data model every other app builds on — experiments, runs, their
logs and metric points, API tokens, alerts and the workers seen — with its migrations and
admin. It imports no other app; the pages and services over these models live in `runs`,
`alerts`, `branching`, `stats`, `demo` and `accounts`."""

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "webapp.experiments"
    default_auto_field = "django.db.models.BigAutoField"
