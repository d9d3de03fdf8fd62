from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    name = "webapp.explorer"
    label = "explorer"
    default_auto_field = "django.db.models.BigAutoField"
