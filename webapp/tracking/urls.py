"""Routes of the MLflow REST subset, mounted at /api/2.0/mlflow/ (where an MLflow client with
MLFLOW_TRACKING_URI=http://<troupe>/ sends its requests). Any other path under it answers
MLflow's ENDPOINT_NOT_FOUND as JSON."""

from django.urls import path, re_path

from webapp.tracking import artifact_views, bulk_history, model_views, views

urlpatterns = [
    path("experiments/get-by-name", views.experiment_by_name),
    path("experiments/create", views.experiment_create),
    path("experiments/get", views.experiment_get),
    path("experiments/search", views.experiment_search),
    path("experiments/update", views.experiment_update),
    path("experiments/delete", views.experiment_delete),
    path("experiments/restore", views.experiment_restore),
    path("experiments/set-experiment-tag", views.experiment_set_tag),
    path("runs/create", views.run_create),
    path("runs/get", views.run_get),
    path("runs/update", views.run_update),
    path("runs/log-batch", views.log_batch),
    path("runs/log-metric", views.log_metric),
    path("runs/log-parameter", views.log_parameter),
    path("runs/set-tag", views.set_tag),
    path("runs/delete-tag", views.delete_tag),
    path("runs/delete", views.run_delete),
    path("runs/restore", views.run_restore),
    path("runs/log-inputs", views.log_inputs),
    path("runs/search", views.run_search),
    path("metrics/get-history", views.metric_history),
    path("metrics/get-history-bulk-interval", bulk_history.bulk_interval),
    path("artifacts/list", artifact_views.run_artifact_list),
    path("runs/outputs", model_views.run_outputs),
    path("runs/log-model", model_views.log_model),
    path("logged-models", model_views.create),
    path("logged-models/search", model_views.search),
    path("logged-models/<str:model_id>", model_views.model),
    path("logged-models/<str:model_id>/tags", model_views.set_tags),
    path("logged-models/<str:model_id>/tags/<path:key>", model_views.delete_tag),
    path("logged-models/<str:model_id>/params", model_views.log_params),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
