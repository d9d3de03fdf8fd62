"""The one door a web request has to a run's weights: a (run, checkpoint name) reference.

A page, an API call or a swap job never names a file. It names a checkpoint as `RUN:NAME`
(`7:best`, `7:step-30`; NAME is `best`, `latest`, `step-N` or `best-N`), or by its name alone
for the run at hand, and the server finds the folder with the trainer's one resolver
(`trainer.checkpoint_index.find_checkpoint`: only a folder directly in that run's
`checkpoints/`, real paths, never an MLflow artifact). Who may take a run's weights is one
rule, the same for a branch, `init_from`, a mix-and-match source and an attribution
(`may_take_weights`: the owner of the run's experiment, or staff), written in
docs/security.md. Messages name the accepted forms and the checkpoints a run keeps, never a
folder on the server's disk.

- `take(user, run_id, name)`: the run and the checkpoint, or `Refused` saying why.
- `reference_of(text)`: (run id, name) of a `RUN:NAME`, or `Refused` naming the form.
- `freeze(run, ref)`: a frozen copy of the checkpoint under `branch-points/` (what a child
  run's `init_from` names: the parent may drop the checkpoint while the child waits).
- `stored_start(frozen)`: how a run's `init_from` names that copy: relative to the data
  directory (`branch-points/run-7-1a2b3c4d/checkpoints/best-000030`), so a config shown to a
  user names no folder of the server; the worker joins it to its own data directory
  (workers/branch_points.py).
- `start_from_reference(user, config, configs)`: a new experiment's runs, their `init_from`
  reference (`RUN:NAME`) checked and replaced by a frozen copy of that checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied

from trainer.checkpoint_index import NAMES, CheckpointRef, check_fits, find_checkpoint
from trainer.config import Config, ConfigError
from trainer.role_sources import parse_reference
from webapp.experiments.models import Run
from webapp.runs.access import can_manage

FORM = f"RUN:NAME, e.g. 7:best (NAME: {NAMES})"
BRANCH_POINTS = "branch-points"


class Refused(ValueError):
    """A reference that cannot be used; `forbidden` when the user may not take the weights."""

    def __init__(self, message: str, forbidden: bool = False):
        super().__init__(message)
        self.forbidden = forbidden


def run_folder(run: Run) -> Path:
    """Where the run's worker trained it (the worker's `workers.execute.run_dir`)."""
    if run.checkpoint_dir:
        return Path(run.checkpoint_dir)
    return Path(settings.DATA_DIR) / "runs" / str(run.id)


def may_take_weights(user, run: Run) -> bool:
    """The one rule: a run's weights go only to its experiment's owner, or staff."""
    return can_manage(user, run.experiment)


def reference_of(text) -> tuple[int, str]:
    """(run id, checkpoint name) of a `RUN:NAME`; Refused naming the form otherwise."""
    parsed = parse_reference(text) if isinstance(text, str) else None
    if parsed is None:
        raise Refused(f"name a checkpoint as {FORM}; a path is not accepted here")
    return parsed


def take(user, run_id: int, name: str) -> tuple[Run, CheckpointRef]:
    """Run `run_id` and its checkpoint `name`, for `user` to take its weights."""
    run = Run.objects.select_related("experiment").filter(id=run_id).first()
    if run is None:
        raise Refused(f"there is no run {run_id}")
    if not may_take_weights(user, run):
        raise Refused(
            f"run {run_id} belongs to another user's experiment: only its owner or staff may "
            "take its weights",
            forbidden=True,
        )
    if run.external or not run.checkpoint_dir:
        raise Refused(f"run {run_id} was not trained here: it has no checkpoints")
    try:
        return run, find_checkpoint(run_folder(run), name)
    except (FileNotFoundError, ValueError) as exc:
        raise Refused(f"run {run_id} {exc}") from None


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed: copy
        shutil.copy2(source, target)


def freeze(run: Run, ref: CheckpointRef) -> Path:
    """A frozen copy of the checkpoint, laid out as a run directory so that whatever the
    trainer reads beside a checkpoint is there too. Each branching makes its own (links cost
    next to nothing): a copy found under a reused run id, after the database was reset, could
    hold another run's checkpoint."""
    # Short: init_from is a config text field (at most 200 characters).
    home = Path(settings.DATA_DIR) / BRANCH_POINTS / f"run-{run.id}-{uuid.uuid4().hex[:8]}"
    staging = home.with_name(f".tmp-{home.name}")
    (staging / "checkpoints").mkdir(parents=True)
    try:
        shutil.copytree(
            ref.path, staging / "checkpoints" / ref.path.name, copy_function=_link_or_copy
        )
        config_json = run_folder(run) / "config.json"
        if config_json.exists():
            _link_or_copy(str(config_json), str(staging / "config.json"))
        staging.rename(home)  # a child never sees a half-made copy
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return home / "checkpoints" / ref.path.name


def stored_start(frozen: Path) -> str:
    """A run's `init_from` for the frozen checkpoint `frozen` (made by `freeze`)."""
    return frozen.relative_to(Path(settings.DATA_DIR)).as_posix()


def start_from_reference(user, config: dict, configs: list[Config]) -> list[Config]:
    """`configs` (a new experiment's runs, from `config`), each starting from the checkpoint
    `config["init_from"]` names as `RUN:NAME`, frozen; unchanged when it names none.
    ConfigError (`init_from`, or the field that does not fit the checkpoint) for anything but
    a reference to a checkpoint the user may take; PermissionDenied for another user's."""
    text = config.get("init_from")
    if text in (None, ""):
        return configs
    try:
        run, ref = take(user, *reference_of(text))
    except Refused as exc:
        if exc.forbidden:
            raise PermissionDenied(str(exc)) from None
        raise ConfigError({"init_from": str(exc)}) from None
    for each in configs:
        check_fits(ref, each, same_sharing=True)
    try:
        frozen = stored_start(freeze(run, ref))
    except FileNotFoundError:  # the run, still training, dropped it just now
        raise ConfigError({"init_from": f"run {run.id} no longer keeps {ref.path.name}"}) from None
    return [dataclasses.replace(each, init_from=frozen) for each in configs]
