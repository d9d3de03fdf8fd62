"""The attribution app: mix-and-match evaluations of a run and which role made its gain."""

from django.apps import AppConfig


class AttributionConfig(AppConfig):
    name = "webapp.attribution"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers swap jobs as a kind of leased job (webapp/leases.py): swept, handed back.
        from webapp.attribution import queueing  # noqa: F401
