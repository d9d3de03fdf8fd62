"""Where each role's weights come from in a mix-and-match evaluation: paths only, no torch.

A source names a checkpoint the way `--role-checkpoint ROLE=SOURCE` spells it:

- `base`: the base model (LoRA adapters at their initial, zero update; full fine-tuning: the
  loaded model);
- a checkpoint name of the run in `out_dir`: `best`, `latest`, `step-N` (`step-120` or
  `step-000120`), `best-N` (`trainer.checkpoint_index.find_checkpoint`, the one resolver);
- `RUN:NAME` (`7:best`, `7:step-30`): a checkpoint of another run, given `runs`, the folder
  holding the run directories (the worker's `$TROUPE_DATA_DIR/runs`; the web server checked
  who may take run 7's weights before the job was queued: docs/security.md);
- a checkpoint directory (`runs/7/checkpoints/step-000030`), only when `paths` is on: the
  operator's own command line, never a web request.

Another run's checkpoint must fit this run (`checkpoint_index.check_fits`: the same model and
policy layout; sharing may differ: each role reads the policy its agents used).

`resolve_sources` turns specs into `RoleSource`s or refuses with a message naming the role,
the source and what is missing or different, so the CLI, the worker and the web pages (which
must not import torch) agree on what can be evaluated before anything is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainer.checkpoint_index import (
    NAMES,
    CheckpointRef,
    check_fits,
    checkpoint_at,
    find_checkpoint,
    is_checkpoint_name,
)
from trainer.config import Config

BASE = "base"
_REFERENCE = re.compile(r"^(\d{1,18}):(.+)$")  # RUN:NAME


@dataclass(frozen=True)
class RoleSource:
    spec: str  # as given: base, a checkpoint name, RUN:NAME or a path
    path: Path | None  # the checkpoint directory; None: the base model
    step: int  # the training step the weights are from (0: the base model)
    config: Config  # the config of the run the checkpoint belongs to (routing its agents)

    @property
    def key(self) -> str:
        """One name per distinct set of weights (two roles from `best` share it)."""
        return str(self.path.resolve()) if self.path is not None else BASE


def parse_reference(spec: str) -> tuple[int, str] | None:
    """(run id, checkpoint name) of a `RUN:NAME` source; None when `spec` is not one."""
    match = _REFERENCE.match(spec)
    if match is None or not is_checkpoint_name(match.group(2)):
        return None
    return int(match.group(1)), match.group(2)


def parse_role_checkpoints(items: list[str], roles: tuple[str, ...]) -> dict[str, str]:
    """{role: source} from `ROLE=SOURCE` strings; ValueError naming a bad one."""
    parsed: dict[str, str] = {}
    for item in items:
        role, sep, source = item.partition("=")
        role, source = role.strip(), source.strip()
        if not sep or not role or not source:
            raise ValueError(f"--role-checkpoint {item!r} should look like ROLE=SOURCE")
        if role not in roles:
            raise ValueError(
                f"--role-checkpoint {item!r}: {role!r} is not a role; the roles are "
                f"{', '.join(roles)}"
            )
        if role in parsed:
            raise ValueError(f"--role-checkpoint: {role!r} is given twice")
        parsed[role] = source
    return parsed


def _checkpoint(
    spec: str, out_dir: Path | None, runs: Path | None, paths: bool
) -> tuple[CheckpointRef, bool]:
    """The checkpoint `spec` names, and whether it is another run's."""
    if is_checkpoint_name(spec):
        if out_dir is None:
            raise ValueError(f"source {spec!r} needs the run's directory (--out DIR)")
        try:
            return find_checkpoint(out_dir, spec), False
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"the run {exc}") from None
    reference = parse_reference(spec)
    if reference is not None and runs is not None:
        run_id, name = reference
        try:
            return find_checkpoint(Path(runs) / str(run_id), name), True
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"run {run_id} {exc}") from None
    if paths:
        return checkpoint_at(spec, "source"), True
    accepted = f"{BASE}, {NAMES}" + (" or RUN:NAME (7:best)" if runs is not None else "")
    raise ValueError(f"{spec!r} is not a source; use {accepted}")


def resolve_source(
    spec: str,
    config: Config,
    out_dir: str | Path | None,
    runs: str | Path | None = None,
    paths: bool = False,
) -> RoleSource:
    """The checkpoint `spec` names for the run of `config` in `out_dir`; `RUN:NAME` with
    `runs` given, a path only with `paths` (the operator's command line)."""
    if spec == BASE:
        return RoleSource(spec, None, 0, config)
    out = Path(out_dir) if out_dir is not None else None
    ref, other = _checkpoint(spec, out, Path(runs) if runs is not None else None, paths)
    owner = check_fits(ref, config) if other else config
    return RoleSource(spec, ref.path, ref.step, owner)


def resolve_sources(
    specs: Mapping[str, str],
    config: Config,
    out_dir: str | Path | None,
    default: str = BASE,
    runs: str | Path | None = None,
    paths: bool = False,
) -> dict[str, RoleSource]:
    """{role: RoleSource} for every role of `config.workflow` (roles not in `specs` take
    `default`); the error names the role whose source cannot be used. `runs`, `paths`: as
    for `resolve_source`."""
    sources: dict[str, RoleSource] = {}
    for role in config.roles:
        spec = specs.get(role, default)
        try:
            sources[role] = resolve_source(spec, config, out_dir, runs, paths)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{role}={spec}: {exc}") from None
        except ValueError as exc:  # a ConfigError too: its fields are the other run's
            raise ValueError(f"{role}={spec}: {exc}") from None
    return sources
