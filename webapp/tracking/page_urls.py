"""Browser routes of the tracking app: a run's artifact, downloaded from its page, an image
artifact shown there, and where the MLflow client's "View run" links lead."""

from django.urls import path

from webapp.tracking import artifact_pages, link_views

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
    path("mlflow/runs/<str:run_id>/", link_views.run_link, name="mlflow_run_link"),
    path(
        "mlflow/experiments/<str:experiment_id>/",
        link_views.experiment_link,
        name="mlflow_experiment_link",
    ),
]
