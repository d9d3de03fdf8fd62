from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    """Installed for its management command (`load_demo_experiment`); it has no models."""

    name = "webapp.dashboards"
    default_auto_field = "django.db.models.BigAutoField"
