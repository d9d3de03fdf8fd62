"""Where each role's weights come from in a mix-and-match evaluation: paths only, no torch.

A source names a checkpoint the way `--role-checkpoint ROLE=SOURCE` spells it:

- `base`: the base model (LoRA adapters at their initial, zero update; full fine-tuning: the
  loaded model);
- `best`, `latest`, `step-N` (`step-120` or `step-000120`, a step or best checkpoint the run
  still keeps): a checkpoint of the run in `out_dir`;
- a checkpoint directory of another run (`runs/7/checkpoints/step-000030`) whose model and
  policy layout are this run's.

`resolve_sources` turns specs into `RoleSource`s or refuses with a message naming the role,
the source and what is missing or different, so the CLI, the worker and the web pages (which
must not import torch) agree on what can be evaluated before anything is loaded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainer.checkpoint_index import (
    STATE_FILE,
    checkpoint_root,
    latest_step_checkpoint,
    list_checkpoints,
    parse_checkpoint,
    read_best,
)
from trainer.config import Config, config_from_dict

BASE = "base"
# What a source checkpoint must share with the run: the policies' shapes and the workflow
# whose roles they play (sharing may differ: each role reads the policy its agents used).
SAME_FIELDS = ("workflow", "model", "finetune", "lora_r", "lora_alpha", "lora_targets")
_STEP = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class RoleSource:
    spec: str  # as given: base, best, latest, step-N or a path
    path: Path | None  # the checkpoint directory; None: the base model
    step: int  # the training step the weights are from (0: the base model)
    config: Config  # the config of the run the checkpoint belongs to (routing its agents)

    @property
    def key(self) -> str:
        """One name per distinct set of weights (two roles from `best` share it)."""
        return str(self.path.resolve()) if self.path is not None else BASE


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


def _kept(out_dir: Path) -> str:
    names = [ref.path.name for ref in list_checkpoints(out_dir)]
    return ", ".join(names) if names else "none"


def _own_checkpoint(spec: str, out_dir: Path | None) -> Path:
    """The directory of `best`, `latest` or `step-N` of the run in `out_dir`."""
    if out_dir is None:
        raise ValueError(f"source {spec!r} needs the run's directory (--out DIR)")
    if spec == "latest":
        ref = latest_step_checkpoint(out_dir)
        if ref is None:
            raise FileNotFoundError(f"{out_dir} holds no step checkpoint yet")
        return ref.path
    if spec == "best":
        best = read_best(out_dir)
        if best is None or not (checkpoint_root(out_dir) / best["path"] / STATE_FILE).exists():
            raise FileNotFoundError(f"{out_dir} holds no best checkpoint")
        return checkpoint_root(out_dir) / best["path"]
    step = int(_STEP.match(spec).group(1))
    for ref in reversed(list_checkpoints(out_dir)):  # a step checkpoint before a best one
        if ref.step == step:
            return ref.path
    raise FileNotFoundError(
        f"the run keeps no checkpoint of step {step} (it keeps: {_kept(out_dir)})"
    )


def _other_run(spec: str, config: Config) -> tuple[Path, Config]:
    """Another run's checkpoint directory and that run's config, checked against `config`."""
    path = Path(spec)
    if parse_checkpoint(path) is None or not (path / STATE_FILE).is_file():
        raise FileNotFoundError(
            f"{spec!r} is not base, best, latest, step-N or a checkpoint directory "
            f"(…/checkpoints/step-NNNNNN holding {STATE_FILE})"
        )
    config_file = path.parent.parent / "config.json"
    try:
        other = config_from_dict(json.loads(config_file.read_text()))
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"cannot read the config of {spec!r} ({config_file}): {exc}")
    for name in SAME_FIELDS:
        if getattr(other, name) != getattr(config, name):
            raise ValueError(
                f"{spec!r} has {name} {getattr(other, name)!r} but this run has "
                f"{getattr(config, name)!r}: a role can only take weights of the same shape"
            )
    return path, other


def resolve_source(spec: str, config: Config, out_dir: str | Path | None) -> RoleSource:
    """The checkpoint `spec` names for the run of `config` in `out_dir`."""
    out = Path(out_dir) if out_dir is not None else None
    if spec == BASE:
        return RoleSource(spec, None, 0, config)
    if spec in ("best", "latest") or _STEP.match(spec):
        path = _own_checkpoint(spec, out)
        return RoleSource(spec, path, parse_checkpoint(path).step, config)
    path, other = _other_run(spec, config)
    return RoleSource(spec, path, parse_checkpoint(path).step, other)


def resolve_sources(
    specs: Mapping[str, str], config: Config, out_dir: str | Path | None, default: str = BASE
) -> dict[str, RoleSource]:
    """{role: RoleSource} for every role of `config.workflow` (roles not in `specs` take
    `default`); the error names the role whose source cannot be used."""
    sources: dict[str, RoleSource] = {}
    for role in config.roles:
        spec = specs.get(role, default)
        try:
            sources[role] = resolve_source(spec, config, out_dir)
        except (FileNotFoundError, ValueError) as exc:
            raise type(exc)(f"{role}={spec}: {exc}") from None
    return sources
