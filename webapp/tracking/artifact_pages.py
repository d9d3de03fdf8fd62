"""The run page's artifacts: the list (a template tag, so the run view stays as it is), the
signed-in download each entry links to, and previews of the first files: the start of a text
or JSON file (escaped by the template), an image (`artifact_image`: png/jpg/gif/webp only,
served with its own type, `nosniff` and a sandbox; never HTML or SVG) and the first rows of
a `log_table` JSON table."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from django import template
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse

from webapp.experiments.models import Run
from webapp.runs.access import get_run_for_user
from webapp.tracking import artifacts
from webapp.tracking.artifact_views import download_response
from webapp.tracking.protocol import MlflowError

register = template.Library()

LISTED = 200  # files shown on the page; the MLflow API lists them all
PREVIEWED = 20  # files previewed, the first listed
TEXT_BYTES = 4096  # the start of a text file shown
TABLE_BYTES = 1024 * 1024  # a table is parsed whole: no larger
TABLE_ROWS = 20
TEXT = {".txt", ".log", ".md", ".json", ".yaml", ".yml", ".csv", ".tsv", ".py", ".toml", ".cfg"}
IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


@dataclass
class Preview:
    kind: str = ""  # "text", "image", "table" or "" (none)
    text: str = ""
    truncated: bool = False
    columns: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    more_rows: int = 0


def preview(path: Path, size: int) -> Preview:
    """What the page shows of one file: nothing for other kinds or an unreadable file."""
    suffix = path.suffix.lower()
    if suffix in IMAGES:
        return Preview("image")
    if suffix not in TEXT:
        return Preview()
    try:
        if suffix == ".json" and size <= TABLE_BYTES:
            table = _table(path.read_bytes())
            if table is not None:
                return table
        with path.open("rb") as handle:
            head = handle.read(TEXT_BYTES)
    except OSError:
        return Preview()
    return Preview("text", head.decode("utf-8", "replace"), truncated=size > TEXT_BYTES)


def _table(data: bytes) -> Preview | None:
    """`mlflow.log_table`'s JSON (pandas' "split" orient: columns and data), else None."""
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("columns"), list):
        return None
    rows = parsed.get("data")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return None
    columns = [str(c) for c in parsed["columns"]]
    shown = [[_cell(c) for c in row] for row in rows[:TABLE_ROWS]]
    return Preview("table", columns=columns, rows=shown, more_rows=max(0, len(rows) - TABLE_ROWS))


def _cell(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 200 else text[:200] + "…"


@register.inclusion_tag("tracking/_artifacts.html")
def artifact_panel(run: Run) -> dict:
    folder = artifacts.run_folder(run.id)
    files = artifacts.walk(folder)
    listed = [
        (entry, preview(folder / entry.path, entry.size or 0) if i < PREVIEWED else Preview())
        for i, entry in enumerate(files[:LISTED])
    ]
    return {"run": run, "files": listed, "more": max(0, len(files) - LISTED)}


@login_required
def artifact_download(request: HttpRequest, run_id: int, path: str) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)  # reading is open to every signed-in user
    try:
        if not artifacts.plain(path):  # `..`, a NUL, a name too long for the disk
            raise Http404("No such artifact.")
        handle = artifacts.open_file(artifacts.run_folder(run.id), path)
    except MlflowError:
        raise Http404("No such artifact.") from None
    return download_response(handle, path.rsplit("/", 1)[-1])


@login_required
def artifact_image(request: HttpRequest, run_id: int, path: str) -> HttpResponse:
    """An image artifact shown on the page: only the raster types in IMAGES, each with its
    own type; the browser may not sniff another, and a sandbox stops any script."""
    run = get_run_for_user(request.user, run_id)
    kind = IMAGES.get(Path(path).suffix.lower())
    if kind is None or not artifacts.plain(path):
        raise Http404("No such image.")
    try:
        handle = artifacts.open_file(artifacts.run_folder(run.id), path)
    except MlflowError:
        raise Http404("No such image.") from None
    response = FileResponse(handle, content_type=kind)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Content-Disposition"] = "inline"
    return response
