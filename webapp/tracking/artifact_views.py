"""MLflow's proxied artifact endpoints, under /api/2.0/mlflow-artifacts/ (where the client
sends what it logs to an `mlflow-artifacts:/` URI): PUT uploads a file, GET downloads one,
DELETE removes a file or folder, and `artifacts?path=…` lists a folder. Reading is open to any
token holder, as every MLflow read is; uploading and deleting need the run's owner or staff
(`store.find_run(manage=True)`). The files themselves are `artifacts.py`'s; the run page's
download links are `artifact_pages.py`'s.
"""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, JsonResponse

from webapp.tracking import artifacts, store
from webapp.tracking.protocol import MISSING, MlflowError, mlflow_view, text


def _run(user, address: artifacts.Address, *, manage: bool = False):
    run = store.find_run(user, address.run_id, manage=manage)
    if str(run.experiment_id) != address.experiment_id:
        raise MlflowError(MISSING, f"Run '{address.run_id}' is not in experiment "
                          f"'{address.experiment_id}'.")  # fmt: skip
    return run


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
        run = _run(user, address)
        handle = artifacts.open_file(run, address.inner)
        return download_response(handle, address.inner.rsplit("/", 1)[-1])
    run = _run(user, address, manage=True)
    if request.method == "PUT":
        length = request.headers.get("Content-Length")
        size = int(length) if length and length.isdigit() else None
        artifacts.save(run, address.inner, request, size)
    else:
        artifacts.delete(run, address.inner)
    return JsonResponse({})


@mlflow_view("GET")
def artifact_list(request: HttpRequest, user, data: dict) -> JsonResponse:
    address = artifacts.parse(text(data, "path", required=True, limit=2000))
    run = _run(user, address)
    files = []
    for entry in artifacts.listing(run, address.inner):
        item = {"path": entry.path, "is_dir": entry.is_dir}
        if entry.size is not None:
            item["file_size"] = entry.size
        files.append(item)
    return JsonResponse({"files": files})
