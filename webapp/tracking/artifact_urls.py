"""Routes of MLflow's artifact service, mounted at /api/2.0/mlflow-artifacts/: what the
client resolves a run's `mlflow-artifacts:/…` URI to. Any other path answers MLflow's
ENDPOINT_NOT_FOUND (presigned URLs and multipart downloads are not implemented: the client
then downloads whole files through `artifacts/`)."""

from django.urls import path, re_path

from webapp.tracking import artifact_views, views

urlpatterns = [
    path("artifacts", artifact_views.artifact_list),
    path("artifacts/", artifact_views.artifact_list),
    re_path(r"^artifacts/(?P<path>.+)$", artifact_views.artifact),
    re_path(r"^mpu/create/(?P<path>.+)$", artifact_views.upload_create),
    re_path(r"^mpu/part/(?P<path>.+)$", artifact_views.upload_part),
    re_path(r"^mpu/complete/(?P<path>.+)$", artifact_views.upload_complete),
    re_path(r"^mpu/abort/(?P<path>.+)$", artifact_views.upload_abort),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
