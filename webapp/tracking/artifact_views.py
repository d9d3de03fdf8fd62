"""MLflow's proxied artifact endpoints, under /api/2.0/mlflow-artifacts/ (where the client
sends what it logs to an `mlflow-artifacts:/` URI): PUT uploads a file, GET downloads one,
DELETE removes a file or folder, and `artifacts?path=…` lists a folder; `mpu/create`, a PUT
to `mpu/part` per part, then `mpu/complete` (or `mpu/abort`) upload a large file in parts.
Reading is open to any token holder, as every MLflow read is; uploading and deleting need the
run's owner or staff (`store.find_run(manage=True)`). A logged model's files are its source
run's to guard. The files themselves are `artifacts.py`'s and `multipart.py`'s; the run
page's download links `artifact_pages.py`'s.
"""

from __future__ import annotations

import ntpath
from pathlib import Path
from urllib.parse import urlencode

from django.http import FileResponse, HttpRequest, JsonResponse

from webapp.ids import whole_number
from webapp.metrics.lookups import Rider, run_rider
from webapp.tracking import artifact_total, artifacts, logged_models, multipart, reads, store
from webapp.tracking.protocol import (
    INVALID,
    MISSING,
    MlflowError,
    integer,
    mlflow_view,
    run_id,
    text,
)


def _root(
    user, address: artifacts.Address, *, manage: bool = False, rider: Rider | None = None
) -> tuple[Path, str, int]:
    """The folder the address points into, the path inside it, and the number of the run it
    belongs to. A Troupe-trained run's best checkpoint is read-only, as a model of its own and
    as its run's folder `troupe-best/`."""
    inner = address.inner
    if address.model_id:
        model = logged_models.find(user, address.model_id, manage=manage)
        run = model.run
        best_folder = getattr(model, "best_folder", None)
        root = best_folder or artifacts.model_folder(run.id, model.model_id)
    else:
        run = store.find_run(user, address.run_id, manage=manage, rider=rider)
        root = artifacts.run_folder(run.id)
        head, _, rest = inner.partition("/")
        if head == logged_models.BEST_NAME and (best := logged_models.best_model(run)):
            if manage:
                raise MlflowError(
                    INVALID,
                    f"'{logged_models.BEST_NAME}/' is Troupe's best "
                    "checkpoint of this run: read-only.",
                )
            root, inner = best.best_folder, rest  # type: ignore[attr-defined]
    if str(run.experiment_id) != address.experiment_id:
        raise MlflowError(
            MISSING,
            f"'{address.run_id or address.model_id}' is not in "
            f"experiment '{address.experiment_id}'.",
        )
    return root, inner, run.id


def download_response(handle, name: str) -> FileResponse:
    """A file as a download, never rendered: an uploaded HTML page opened from Troupe's
    address would otherwise run its scripts as the reader."""
    response = FileResponse(handle, as_attachment=True, filename=name)
    response["Content-Type"] = "application/octet-stream"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    return response


def _path_run(kwargs: dict) -> Rider | None:
    """The run an artifact path names, to look up with the token (`lookups.run_rider`); None
    for a model's path or one `artifacts.parse` refuses (the view then says why)."""
    path = kwargs.get("path", "")
    try:
        address = artifacts.parse(path)
    except MlflowError:
        return None
    return run_rider(address.run_id) if address.run_id else None


@mlflow_view("GET", "PUT", "DELETE", rider=_path_run)
def artifact(request: HttpRequest, user, data: dict, path: str):
    address = artifacts.parse(path)
    rider = request.mlflow_rider  # type: ignore[attr-defined]
    if request.method == "GET":
        root, inner, _ = _root(user, address, rider=rider)
        handle = artifacts.open_file(root, inner)
        return download_response(handle, inner.rsplit("/", 1)[-1])
    root, inner, run_id = _root(user, address, manage=True, rider=rider)
    if request.method == "PUT":
        with artifact_total.tally(run_id) as total:
            written, replaced = artifacts.save(
                root, inner, request, _length(request), used=total.used()
            )
            total.add(written - replaced)
    else:
        artifact_total.recount(run_id)
        artifacts.delete(root, inner)
    return JsonResponse({})


@mlflow_view("GET")
def run_artifact_list(request: HttpRequest, user, data: dict) -> JsonResponse:
    """/api/2.0/mlflow/artifacts/list?run_id=&path=: MLflow's older listing, by run, with
    paths from the run's artifact root (the client itself lists through
    mlflow-artifacts/)."""
    run = store.find_run(user, run_id(data))
    uri = reads.runs_json([run], user)[0]["info"]["artifact_uri"]
    inner = text(data, "path", limit=2000).strip("/")
    listed = _listing(user, artifacts.parse(f"{uri.removeprefix('mlflow-artifacts:')}/{inner}"))
    for item in listed:
        item["path"] = f"{inner}/{item['path']}" if inner else item["path"]
    return JsonResponse({"root_uri": uri, "files": listed})


@mlflow_view("GET")
def artifact_list(request: HttpRequest, user, data: dict) -> JsonResponse:
    return JsonResponse(
        {"files": _listing(user, artifacts.parse(text(data, "path", required=True, limit=2000)))}
    )


def _listing(user, address: artifacts.Address) -> list[dict]:
    """A folder's entries as MLflow lists them: {path (from the folder), is_dir, file_size}."""
    root, inner, _ = _root(user, address)
    files = []
    entries = artifacts.listing(root, inner)
    if not address.model_id and not address.inner:  # a Troupe-trained run's best checkpoint, beside
        run = store.find_run(user, address.run_id)
        if logged_models.best_model(run) is not None:
            entries = [artifacts.Entry(logged_models.BEST_NAME, True, None), *entries]
    for entry in entries:
        item = {"path": entry.path, "is_dir": entry.is_dir}
        if entry.size is not None:
            item["file_size"] = entry.size
        files.append(item)
    return files


def _length(request: HttpRequest) -> int | None:
    length = request.headers.get("Content-Length")
    return whole_number(length) if length else None


# --- multipart uploads ---------------------------------------------------------------------------


def _file_address(folder: str, data: dict) -> artifacts.Address:
    """The file a multipart request is about: the folder in its path and, as MLflow's server
    takes it, the base name of the body's `path` (clients before 3.18 sent a local path)."""
    name = ntpath.basename(text(data, "path", required=True, limit=1000))
    return artifacts.parse(f"{folder.strip('/')}/{name}")


@mlflow_view("POST")
def upload_create(request: HttpRequest, user, data: dict, path: str) -> JsonResponse:
    address = _file_address(path, data)
    root, inner, run_id = _root(user, address, manage=True)
    parts = integer(data, "num_parts", default=1, low=1, high=multipart.MAX_PARTS)
    artifact_total.recount(run_id)  # creating one removes stale parts
    upload_id = multipart.create(root, inner, parts, run_id=run_id)
    # The parts go where the client would send S3's presigned URLs, here; they are sent with
    # the headers given beside them, so the caller's own token goes along (back to the caller
    # that sent it, over the same connection) and each part is checked as any upload is.
    target = request.build_absolute_uri(f"/api/2.0/mlflow-artifacts/mpu/part/{path.strip('/')}")
    headers = {"Authorization": request.headers["Authorization"]}
    name = inner.rsplit("/", 1)[-1]
    credentials = [
        {
            "url": f"{target}?"
            + urlencode({"path": name, "upload_id": upload_id, "part_number": number}),
            "part_number": number,
            "headers": headers,
        }
        for number in range(1, parts + 1)
    ]
    return JsonResponse({"upload_id": upload_id, "credentials": credentials})


@mlflow_view("PUT")
def upload_part(request: HttpRequest, user, data: dict, path: str) -> JsonResponse:
    query = {name: request.GET.get(name) for name in ("path", "upload_id", "part_number")}
    address = _file_address(path, query)
    root, inner, run_id = _root(user, address, manage=True)
    upload = multipart.find(root, inner, text(query, "upload_id", required=True), run_id=run_id)
    number = integer(query, "part_number", low=1, high=multipart.MAX_PARTS)
    if number is None:
        raise MlflowError(INVALID, "Missing value for required parameter 'part_number'.")
    with artifact_total.tally(run_id) as total:
        etag, grown = multipart.put_part(
            upload, number, request, _length(request), used=total.used()
        )
        total.add(grown)
    response = JsonResponse({})
    response["ETag"] = etag
    return response


@mlflow_view("POST")
def upload_complete(request: HttpRequest, user, data: dict, path: str) -> JsonResponse:
    address = _file_address(path, data)
    root, inner, run_id = _root(user, address, manage=True)
    upload = multipart.find(root, inner, text(data, "upload_id", required=True), run_id=run_id)
    listed = data.get("parts")
    if not isinstance(listed, list) or not all(isinstance(p, dict) for p in listed):
        raise MlflowError(
            INVALID, "Completing an upload needs its 'parts': a list of {part_number, etag}."
        )
    parts = [
        (
            integer(p, "part_number", low=1, high=multipart.MAX_PARTS) or 0,
            text(p, "etag", limit=100),
        )
        for p in listed
    ]
    artifact_total.recount(run_id)  # parts joined, unlisted ones dropped, a file replaced
    multipart.complete(upload, parts)
    return JsonResponse({})


@mlflow_view("POST")
def upload_abort(request: HttpRequest, user, data: dict, path: str) -> JsonResponse:
    address = _file_address(path, data)
    _, _, run_id = _root(user, address, manage=True)
    artifact_total.recount(run_id)
    multipart.abort(run_id, text(data, "upload_id", required=True, limit=100))
    return JsonResponse({})
