"""Multipart uploads of MLflow artifacts (`MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD=true` on the
client): a large file arrives as numbered parts, each its own request, and becomes the
artifact only when the client completes the upload, so a part that fails is sent again alone
and no request carries the whole file.

The parts of upload U of run N wait in `$TROUPE_DATA_DIR/runs/N/uploads/U/` (`meta.json`
names the file they make; part k is the file `k`, its ETag `k.etag`), inside the run's
directory: they count in the run's limit and go with the run. Each part is streamed to disk
as the single-file upload is (`artifacts.receive`). Completing appends the parts, in order,
onto the first (inside the kernel: `copy_file_range`) and renames the result into place: a
reader sees the whole file or none, and the server never holds a part in memory. An upload
never completed is removed when it is aborted, or when the run starts another a day after
its last part arrived.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from webapp.tracking import artifacts
from webapp.tracking.protocol import INVALID, MISSING, MlflowError

MAX_PARTS = 10_000  # S3's limit, which MLflow's client is written against
STALE_SECONDS = 24 * 3600
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Upload:
    folder: Path  # where the parts wait
    root: Path  # the run's (or model's) artifact folder
    inner: str  # the artifact the parts make, under root
    parts: int


def _uploads(run_id: int) -> Path:
    return artifacts.run_folder(run_id).parent / "uploads"


def create(root: Path, inner: str, parts: int, *, run_id: int) -> str:
    """A new upload of the file `inner` under `root` in `parts` parts; its id."""
    if not 1 <= parts <= MAX_PARTS:
        raise MlflowError(INVALID, f"A multipart upload has 1 to {MAX_PARTS:,} parts, not {parts}.")
    if artifacts.locate(root, inner).is_dir():
        raise MlflowError(INVALID, f"Artifact '{inner}' is a folder; upload files into it.")
    _remove_stale(run_id)
    upload_id = secrets.token_hex(16)
    folder = _uploads(run_id) / upload_id
    folder.mkdir(parents=True)
    meta = {"root": str(root), "inner": inner, "parts": parts}
    (folder / "meta.json").write_text(json.dumps(meta))
    return upload_id


def find(root: Path, inner: str, upload_id: str, *, run_id: int) -> Upload:
    """The upload, which must be of this very artifact (a part sent to another path is
    refused rather than stored where its upload did not say)."""
    folder = _uploads(run_id) / upload_id if _UPLOAD_ID.fullmatch(upload_id) else None
    if folder is None or not (folder / "meta.json").is_file():
        raise MlflowError(
            MISSING,
            f"No multipart upload '{upload_id[:40]}' in this run (it "
            "was completed, aborted, or never made).",
        )
    meta = json.loads((folder / "meta.json").read_text())
    if meta["root"] != str(root) or meta["inner"] != inner:
        raise MlflowError(
            INVALID, f"Multipart upload '{upload_id}' is of '{meta['inner']}', not '{inner}'."
        )
    return Upload(folder, root, inner, meta["parts"])


def _part_sizes(upload: Upload) -> dict[int, int]:
    return {int(p.name): p.stat().st_size for p in upload.folder.iterdir() if p.name.isdecimal()}


def put_part(
    upload: Upload, number: int, stream: BinaryIO, length: int | None, *, used: int
) -> tuple[str, int]:
    """Store part `number` (the run's directory holding `used` bytes before it): its ETag,
    and by how much the directory grew. A part sent again replaces the earlier one."""
    if not 1 <= number <= upload.parts:
        raise MlflowError(
            INVALID, f"Part {number} is not one of the upload's {upload.parts} parts."
        )
    sizes = _part_sizes(upload)
    replaced = sizes.pop(number, 0)
    limit = settings.TROUPE_ARTIFACT_MAX_BYTES - sum(sizes.values())  # the whole file's
    room = settings.TROUPE_RUN_ARTIFACTS_MAX_BYTES - used + replaced  # parts included
    if length is not None:
        artifacts.check_size(length, limit, room)
    temporary, written = artifacts.receive(stream, length, upload.folder, limit, room)
    # A fresh tag per stored part (S3 gives the MD5, which would cost a pass over the bytes):
    # completing checks that the client's list names the parts as stored, not older ones.
    etag = secrets.token_hex(16)
    (upload.folder / f"{number}.etag").write_text(etag)  # before the part
    temporary.replace(upload.folder / str(number))
    return f'"{etag}"', written - replaced


def complete(upload: Upload, parts: list[tuple[int, str]]) -> int:
    """Join the listed parts (numbers rising; their ETags, where given, those stored) into
    the artifact; its size. The upload is gone afterwards."""
    numbers = [number for number, _ in parts]
    if not numbers or numbers != sorted(set(numbers)):
        raise MlflowError(
            INVALID, "Completing an upload lists its parts once each, numbers rising."
        )
    sizes = _part_sizes(upload)
    missing = [n for n in numbers if n not in sizes]
    if missing:
        raise MlflowError(
            INVALID, f"Part {missing[0]} of the upload never arrived; send it before completing."
        )
    for number, etag in parts:
        if etag and etag.strip('"') != (upload.folder / f"{number}.etag").read_text():
            raise MlflowError(INVALID, f"Part {number}'s ETag {etag} is not the stored part's.")
    total = sum(sizes[n] for n in numbers)
    artifacts.check_size(total, settings.TROUPE_ARTIFACT_MAX_BYTES, total)
    target = artifacts.locate(upload.root, upload.inner)
    if target.is_dir():
        raise MlflowError(INVALID, f"Artifact '{upload.inner}' is a folder; upload files into it.")
    first = upload.folder / str(numbers[0])
    with first.open("r+b") as out:  # not "ab": copy_file_range refuses O_APPEND
        out.seek(0, os.SEEK_END)
        for number in numbers[1:]:
            _append(upload.folder / str(number), out)
    target.parent.mkdir(parents=True, exist_ok=True)
    artifacts.locate(upload.root, upload.inner)  # again, now that the folders exist
    first.replace(target)
    shutil.rmtree(upload.folder, ignore_errors=True)
    return total


def _append(part: Path, out: BinaryIO) -> None:
    """Copy the part onto the end of `out` inside the kernel (a reflink where the filesystem
    can), falling back to a buffered copy where `copy_file_range` is not supported."""
    with part.open("rb") as source:
        left = part.stat().st_size
        try:
            while left > 0 and (copied := os.copy_file_range(source.fileno(), out.fileno(), left)):
                left -= copied
        except OSError:
            pass  # not on this filesystem: finish below
        source.seek(part.stat().st_size - left)
        out.seek(0, os.SEEK_END)
        shutil.copyfileobj(source, out, artifacts.CHUNK)


def abort(run_id: int, upload_id: str) -> None:
    """Drop the upload's parts (nothing to do when it is already gone: the client aborts after
    a failure, and its own error is the one to show)."""
    if _UPLOAD_ID.fullmatch(upload_id):
        shutil.rmtree(_uploads(run_id) / upload_id, ignore_errors=True)


def _remove_stale(run_id: int) -> None:
    folder = _uploads(run_id)
    if not folder.is_dir():
        return
    cutoff = time.time() - STALE_SECONDS
    for upload in folder.iterdir():
        if upload.stat().st_mtime < cutoff:  # a part arriving touches its folder
            shutil.rmtree(upload, ignore_errors=True)
