"""MLflow artifacts on disk, as `mlflow server --serve-artifacts` keeps them: the files a client
uploads through `/api/2.0/mlflow-artifacts/artifacts/<path>` and reads back the same way.

A run's artifact URI is `mlflow-artifacts:/<experiment id>/<run id>/artifacts`; its files live
in `$TROUPE_DATA_DIR/runs/<Troupe run number>/artifacts/`, inside the run's directory, and a
logged model's (`…/models/<model id>/artifacts`) in `runs/<number>/models/<model id>/` of the
run that made it, so deleting the run deletes them (`webapp/runs/run_files.py`). A
path is confined to its run: every part is a plain name (no `..`, `.`, empty part, backslash
or NUL), and the resolved file must still lie under its folder (a symlink planted there leads
nowhere). An upload goes to a temporary file beside its target and is renamed into place once
whole, so a reader never sees half a file and a refused upload leaves nothing.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from webapp.experiments.models import Run
from webapp.tracking.protocol import INVALID, MISSING, MlflowError

ROOT_PART = "artifacts"  # the last part of every run's artifact URI
TOTAL_FILE = ".artifact-bytes"  # the run's running total (`artifact_total.py`), not counted
CHUNK = 1024 * 1024
PART_BYTES = 255  # the longest name a Linux filesystem holds (NAME_MAX)
PATH_BYTES = 1024  # well under PATH_MAX (4096) once the data directory is in front


def artifact_uri(run: Run, run_id: str) -> str:
    return f"mlflow-artifacts:/{run.experiment_id}/{run_id}/{ROOT_PART}"


def experiment_location(experiment_id: int) -> str:
    return f"mlflow-artifacts:/{experiment_id}"


def run_folder(run_id: int) -> Path:
    return Path(settings.DATA_DIR) / "runs" / str(run_id) / ROOT_PART


def model_uri(experiment_id: int, model_id: str) -> str:
    return f"mlflow-artifacts:/{experiment_id}/models/{model_id}/{ROOT_PART}"


def model_folder(run_id: int, model_id: str) -> Path:
    """A logged model's files, in the directory of the run that made it."""
    return Path(settings.DATA_DIR) / "runs" / str(run_id) / "models" / model_id


@dataclass(frozen=True)
class Address:
    """Where a request's path points: a run's artifacts (`run_id`) or a logged model's
    (`model_id`), by experiment, and the path inside them ("" for the root)."""

    experiment_id: str
    run_id: str
    model_id: str
    inner: str


def plain(path: str) -> bool:
    """Whether every part of `path` is a plain name the disk can hold: not empty, `.` or `..`,
    no backslash or NUL, at most PART_BYTES bytes (a longer name is ENAMETOOLONG, not a
    missing file), and the whole at most PATH_BYTES."""
    if len(path.encode("utf-8", "surrogatepass")) > PATH_BYTES:
        return False
    return all(
        part not in ("", ".", "..")
        and "\\" not in part
        and "\x00" not in part
        and len(part.encode("utf-8", "surrogatepass")) <= PART_BYTES
        for part in path.split("/")
    )


def parse(path: str) -> Address:
    """`<experiment>/<run id>/artifacts[/<path>]` or `<experiment>/models/<model id>/artifacts
    [/<path>]`, every part checked."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    model = len(parts) >= 2 and parts[1] == "models"
    head = 4 if model else 3
    if len(parts) < head or parts[head - 1] != ROOT_PART:
        raise MlflowError(
            INVALID,
            f"Artifact path {path!r} names no run: Troupe keeps artifacts under "
            "<experiment id>/<run id>/artifacts/ (the run's artifact_uri).",
        )
    if not plain(path.strip("/")):
        raise MlflowError(
            INVALID,
            f"Invalid artifact path: each part must be a plain name of at most {PART_BYTES} "
            f"bytes (no '..', '.', empty part, backslash or NUL), {PATH_BYTES} bytes in all.",
        )
    inner = "/".join(parts[head:])
    if model:
        return Address(parts[0], "", parts[2], inner)
    return Address(parts[0], parts[1], "", inner)


def locate(root: Path, inner: str) -> Path:
    """The file or folder `inner` under `root` (a run's or a model's), proved to lie inside:
    its parts are plain names (`parse`), so only a symbolic link among them could lead out,
    and Troupe makes none there. One `lstat` a part that exists, where resolving both paths
    (`os.path.realpath`) looked at every folder from `/` down: a tenth of an upload's time."""
    path = root
    for part in inner.split("/") if inner else ():
        path = path / part
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            break  # this part does not exist, so neither does anything below it
        if link:
            raise MlflowError(INVALID, f"Artifact path '{inner}' leads outside its run.")
    return root / inner if inner else root


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the listed folder
    is_dir: bool
    size: int | None


def listing(root: Path, inner: str) -> list[Entry]:
    """The folder's entries (none for a file or a missing folder, as MLflow's stores do)."""
    folder = locate(root, inner)
    if not folder.is_dir():
        return []
    entries = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith(".upload-"):
            continue  # an upload still arriving
        if child.is_symlink():
            continue  # Troupe never makes one; never follow one
        if child.is_dir():
            entries.append(Entry(child.name, True, None))
        elif child.is_file():
            entries.append(Entry(child.name, False, child.stat().st_size))
    return entries


def walk(root: Path) -> list[Entry]:
    """Every file under `root`, paths from it (the run page's list, the run's total)."""
    if not root.is_dir():
        return []
    files = []
    for folder, names, filenames in os.walk(root):
        names[:] = sorted(n for n in names if not Path(folder, n).is_symlink())
        for name in sorted(filenames):
            path = Path(folder, name)
            if name.startswith(".upload-") or name == TOTAL_FILE or path.is_symlink():
                continue
            files.append(Entry(path.relative_to(root).as_posix(), False, path.stat().st_size))
    return files


def used_bytes(root: Path) -> int:
    return sum(entry.size or 0 for entry in walk(root))


def save(
    root: Path, inner: str, stream: BinaryIO, length: int | None, *, used: int
) -> tuple[int, int]:
    """Store the upload as the file `inner` under `root`: its size, and the size of the file
    it replaced (0: none). Over a limit (the run's total, `used` bytes before it, counts the
    folder of the run: its artifacts and its models), nothing is kept."""
    if not inner:
        raise MlflowError(INVALID, "An upload needs a file name after the run's artifacts/.")
    limit = settings.TROUPE_ARTIFACT_MAX_BYTES
    room = settings.TROUPE_RUN_ARTIFACTS_MAX_BYTES - used
    target = locate(root, inner)
    try:  # one stat for what the target is: a folder, the file it replaces, or nothing yet
        mode, size = (found := os.stat(target)).st_mode, found.st_size
    except FileNotFoundError:
        mode = size = 0
    if stat.S_ISDIR(mode):
        raise MlflowError(INVALID, f"Artifact '{inner}' is a folder; upload files into it.")
    replaced = size if stat.S_ISREG(mode) else 0
    room += replaced  # replaced, not added
    if length is not None:
        check_size(length, limit, room)
    # Most uploads go into a folder that is there already (the 2nd to 1,000th file of a
    # logged folder): then neither the folders nor the second look are needed.
    if not mode and not target.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        locate(root, inner)  # again, now that the folders exist
    temporary, written = receive(stream, length, target.parent, limit, room)
    try:
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return written, replaced


def receive(
    stream: BinaryIO, length: int | None, folder: Path, limit: int, room: int
) -> tuple[Path, int]:
    """Copy the request body, a megabyte at a time (never whole in memory), into a temporary
    file in `folder`: its path and size. Past `limit` or `room`, or shorter than `length`
    (the connection cut), the file is removed and MlflowError raised."""
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".upload-")
    written = 0
    try:
        with os.fdopen(handle, "wb") as out:
            while chunk := stream.read(CHUNK):
                written += len(chunk)
                check_size(written, limit, room)
                out.write(chunk)
        if length is not None and written != length:
            raise MlflowError(
                INVALID,
                f"The upload ended after {written:,} of the {length:,} bytes it "
                "announced (Content-Length); nothing was stored.",
            )
    except BaseException:
        os.unlink(temporary)
        raise
    return Path(temporary), written


def check_size(size: int, limit: int, room: int) -> None:
    if size > limit:
        raise MlflowError(
            INVALID,
            f"The artifact is larger than {limit:,} bytes, the most one upload may "
            "carry (TROUPE_ARTIFACT_MAX_BYTES); nothing was stored.",
        )
    if size > room:
        total = settings.TROUPE_RUN_ARTIFACTS_MAX_BYTES
        raise MlflowError(
            INVALID,
            f"The run's artifacts would exceed {total:,} bytes, the most one run may "
            "hold (TROUPE_RUN_ARTIFACTS_MAX_BYTES); nothing was stored.",
        )


def open_file(root: Path, inner: str) -> BinaryIO:
    path = locate(root, inner)
    if not inner or not path.is_file() or path.is_symlink():
        raise MlflowError(MISSING, f"No artifact file '{inner}' in this run.")
    return path.open("rb")


def clear(run_id: int) -> None:
    shutil.rmtree(run_folder(run_id), ignore_errors=True)


def delete(root: Path, inner: str) -> None:
    """Remove the file or folder `inner` (the whole of `root` for "")."""
    path = locate(root, inner)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    else:
        raise MlflowError(MISSING, f"No artifact '{inner}' in this run.")
