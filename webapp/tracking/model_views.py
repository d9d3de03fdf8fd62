"""MLflow 3's logged-model endpoints under /api/2.0/mlflow/logged-models (`logged_models.py`
holds what they do), and runs/outputs and runs/log-model, which the client sends beside them."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from webapp.tracking import logged_models, store
from webapp.tracking.protocol import (
    INVALID,
    MlflowError,
    entity_name,
    integer,
    list_param,
    mlflow_view,
    page_offset,
    page_token,
    proto_shape,
    run_id,
    text,
)

MAX_MODELS = 1000


@mlflow_view("POST")
def create(request: HttpRequest, user, data: dict) -> JsonResponse:
    model = logged_models.create(
        user,
        experiment=text(data, "experiment_id", limit=20),
        run_id=text(data, "source_run_id", limit=64),
        name=text(data, "name", limit=250),
        model_type=text(data, "model_type", limit=500),
        tags=store.checked_tags(list_param(data, "tags"), limit=store.TAG_VALUE_LIMIT),
        params=store.checked_params(list_param(data, "params"), limit=store.PARAM_VALUE_LIMIT),
    )
    return JsonResponse({"model": logged_models.model_json(model)})


@mlflow_view("GET", "PATCH", "DELETE")
def model(request: HttpRequest, user, data: dict, model_id: str) -> JsonResponse:
    if request.method == "GET":
        found = logged_models.find(user, model_id)
        return JsonResponse({"model": logged_models.model_json(found)})
    found = logged_models.find(user, model_id, manage=True)
    if request.method == "DELETE":
        found.delete()  # its files stay with the run until the run goes
        return JsonResponse({})
    status = data.get("status")
    if not isinstance(status, str):
        raise MlflowError(INVALID, "Finalizing a model needs its 'status'.")
    logged_models.finalize(found, status)
    return JsonResponse({"model": logged_models.model_json(found)})


@mlflow_view("PATCH")
def set_tags(request: HttpRequest, user, data: dict, model_id: str) -> JsonResponse:
    found = logged_models.find(user, model_id, manage=True)
    logged_models.update(
        found, tags=store.checked_tags(list_param(data, "tags"), limit=store.TAG_VALUE_LIMIT)
    )
    return JsonResponse({})


@mlflow_view("DELETE")
def delete_tag(request: HttpRequest, user, data: dict, model_id: str, key: str) -> JsonResponse:
    found = logged_models.find(user, model_id, manage=True)
    logged_models.update(found, drop_tag=entity_name("tag", key))
    return JsonResponse({})


@mlflow_view("POST")
def log_params(request: HttpRequest, user, data: dict, model_id: str) -> JsonResponse:
    found = logged_models.find(user, model_id, manage=True)
    logged_models.update(
        found,
        params=store.checked_params(list_param(data, "params"), limit=store.PARAM_VALUE_LIMIT),
    )
    return JsonResponse({})


@mlflow_view("POST")
def search(request: HttpRequest, user, data: dict) -> JsonResponse:
    experiment_ids = []
    for raw in list_param(data, "experiment_ids"):
        experiment = store.find_experiment(user, str(raw))
        if experiment is not None:
            experiment_ids.append(experiment.id)
    found = logged_models.search_models(experiment_ids, text(data, "filter", limit=5000))
    limit = max(1, min(int(data.get("max_results") or MAX_MODELS), MAX_MODELS))
    offset = page_offset(data)
    body = {"models": [logged_models.model_json(m) for m in found[offset : offset + limit]]}
    if offset + limit < len(found):
        body["next_page_token"] = page_token(offset + limit)
    return JsonResponse(proto_shape(body))


@mlflow_view("POST")
def run_outputs(request: HttpRequest, user, data: dict) -> JsonResponse:
    """The models a run logged (`run.outputs.model_outputs`): [{"model_id", "step"}]."""
    run = store.find_run(user, run_id(data), manage=True)
    outputs = []
    for i, entry in enumerate(list_param(data, "models")):
        if not isinstance(entry, dict):
            raise MlflowError(INVALID, f"models[{i}] must be an object {{model_id, step}}.")
        model_id = text(entry, "model_id", required=True, limit=40)
        logged_models.find(user, model_id)  # it exists
        outputs.append(
            {
                "model_id": model_id,
                "step": integer(entry, "step", default=0, low=-(2**63), high=2**63 - 1),
            }
        )
    logged_models.add_outputs(run, outputs)
    return JsonResponse({})


@mlflow_view("POST")
def log_model(request: HttpRequest, user, data: dict) -> JsonResponse:
    """MLflow 2's record of a model on its run (a history tag); MLflow 3 keeps logged models."""
    store.find_run(user, run_id(data), manage=True)
    return JsonResponse({})
