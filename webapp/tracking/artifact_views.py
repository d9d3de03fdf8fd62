"""MLflow's proxied artifact endpoints, under /api/2.0/mlflow-artifacts/ (where the client
sends what it logs to an `mlflow-artifacts:/` URI): PUT uploads a file, GET downloads one,
DELETE removes a file or folder, and `artifacts?path=…` lists a folder. Reading is open to any
token holder, as every MLflow read is; uploading and deleting need the run's owner or staff
(`store.find_run(manage=True)`). A logged model's files are its source run's to guard. The
files themselves are `artifacts.py`'s; the run page's download links `artifact_pages.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from django.http import FileResponse, HttpRequest, JsonResponse

from webapp.tracking import artifacts, store
from webapp.tracking.models import LoggedModel
from webapp.tracking.protocol import MISSING, MlflowError, mlflow_view, text


def _root(user, address: artifacts.Address, *, manage: bool = False) -> tuple[Path, int]:
    """The folder the address points into and the number of the run it belongs to."""
    if address.model_id:
        model = LoggedModel.objects.filter(model_id=address.model_id).first()
        if model is None:
            raise MlflowError(MISSING, f"Logged model '{address.model_id}' not found.")
        run = store.find_run(user, str(model.run_id), manage=manage)
        root = artifacts.model_folder(run.id, model.model_id)
    else:
        run = store.find_run(user, address.run_id, manage=manage)
        root = artifacts.run_folder(run.id)
    if str(run.experiment_id) != address.experiment_id:
        raise MlflowError(MISSING, f"'{address.run_id or address.model_id}' is not in "
                          f"experiment '{address.experiment_id}'.")  # fmt: skip
    return root, run.id


def download_response(handle, name: str) -> FileResponse:
    """A file as a download, never rendered: an uploaded HTML page opened from Troupe's
    address would otherwise run its scripts as the reader."""
    response = FileResponse(handle, as_attachment=True, filename=name)
    response["Content-Type"] = "application/octet-stream"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    return response


@mlflow_view("GET", "PUT", "DELETE")
def artifact(request: HttpRequest, user, data: dict, path: str):
    address = artifacts.parse(path)
    if request.method == "GET":
        root, _ = _root(user, address)
        handle = artifacts.open_file(root, address.inner)
        return download_response(handle, address.inner.rsplit("/", 1)[-1])
    root, run_id = _root(user, address, manage=True)
    if request.method == "PUT":
        length = request.headers.get("Content-Length")
        size = int(length) if length and length.isdigit() else None
        artifacts.save(root, address.inner, request, size, run_id=run_id)
    else:
        artifacts.delete(root, address.inner)
    return JsonResponse({})


@mlflow_view("GET")
def artifact_list(request: HttpRequest, user, data: dict) -> JsonResponse:
    address = artifacts.parse(text(data, "path", required=True, limit=2000))
    root, _ = _root(user, address)
    files = []
    for entry in artifacts.listing(root, address.inner):
        item = {"path": entry.path, "is_dir": entry.is_dir}
        if entry.size is not None:
            item["file_size"] = entry.size
        files.append(item)
    return JsonResponse({"files": files})
