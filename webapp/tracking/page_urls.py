"""Browser routes of the tracking app: a run's artifact, downloaded from its page, and an
image artifact shown there."""

from django.urls import path

from webapp.tracking import artifact_pages

urlpatterns = [
    path(
        "runs/<int:run_id>/artifacts/<path:path>",
        artifact_pages.artifact_download,
        name="run_artifact",
    ),
    path(
        "runs/<int:run_id>/artifact-images/<path:path>",
        artifact_pages.artifact_image,
        name="run_artifact_image",
    ),
]
