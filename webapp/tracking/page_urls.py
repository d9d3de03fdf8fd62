"""Browser routes of the tracking app: a run's artifact, downloaded from its page."""

from django.urls import path

from webapp.tracking import artifact_pages

urlpatterns = [
    path(
        "runs/<int:run_id>/artifacts/<path:path>",
        artifact_pages.artifact_download,
        name="run_artifact",
    ),
]
