"""The experiments app in Django's admin, for staff: browse and fix rows by hand."""

from django.contrib import admin

from vocabulary.names import MATRIX_AXES
from webapp.experiments.models import ApiToken, Experiment, Run


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "preset", "created")
    search_fields = ("name", "owner__username")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "experiment", *MATRIX_AXES, "status")
    list_filter = ("status", "queue", "external")
    search_fields = ("experiment__name", "worker")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created", "last_used")
    readonly_fields = ("prefix", "digest", "created", "last_used")
