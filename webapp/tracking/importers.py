"""Readers of training logs written elsewhere, for `manage.py import_runs`.

Each reader yields `Scalar`s (key, step, value, wall time in ms) from one source:

- TensorBoard event files (`events.out.tfevents.*`, as written by torch's SummaryWriter,
  tensorboardX, TensorFlow or TRL/HF's TensorBoard callback), read with the `tensorboard`
  package's own event-file loader: scalars written as `simple_value` and TF2's scalar tensors;
- verl's `file` logger (`trainer.logger=['file']`): JSON lines `{"step": n, "data": {key: v}}`;
- Troupe's own `metrics.jsonl` (`python -m trainer run --out DIR`): `{"step", "key", "value"}`;
- verl's rollout dumps (`trainer.rollout_data_dir`: `<step>.jsonl` files of `{"input",
  "output", "score", "step", …}`): no scalars, but episodes (`webapp/tracking/verl_rollouts.py`);
  a directory of them is one run.

Non-numeric values (text, lists) are not scalars and are skipped; non-finite ones are counted
and skipped (Troupe stores finite numbers). A source is one run: a JSONL file, or a directory
holding event files (all of its event files together, as TensorBoard shows one run).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from webapp.tracking.verl_rollouts import is_rollout_dump, rollout_records

EVENT_GLOB = "events.out.tfevents.*"


@dataclass(frozen=True)
class Scalar:
    key: str
    step: int
    value: float
    wall_ms: int | None


@dataclass
class Source:
    """One run to import: where it is, and how to read it."""

    path: Path
    kind: str  # "tensorboard", "jsonl" or "verl_rollouts"
    skipped: dict[str, int] = field(default_factory=dict)  # why → how many values

    @property
    def name(self) -> str:
        return self.path.stem if self.path.is_file() else self.path.name

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def scalars(self) -> Iterator[Scalar]:
        if self.kind == "tensorboard":
            return _tensorboard(self)
        if self.kind == "verl_rollouts":
            return iter(())  # episodes only: `episodes()`
        return _jsonl(self)

    def episodes(self, kind: str = "train") -> Iterator[dict]:
        """Episode records of a rollout dump (none from other sources)."""
        if self.kind != "verl_rollouts":
            return iter(())
        return rollout_records(self.path, kind)


def find_sources(path: Path) -> list[Source]:
    """The runs under `path`: itself when it is a JSONL file or an event file's directory,
    else every directory below it with event files and every *.jsonl file below it."""
    path = path.resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.is_file():
        if path.name.startswith("events.out.tfevents."):
            return [Source(path.parent, "tensorboard")]
        return [Source(path, "verl_rollouts" if is_rollout_dump(path) else "jsonl")]
    found = []
    for directory in sorted({p.parent for p in path.rglob(EVENT_GLOB)}):
        found.append(Source(directory, "tensorboard"))
    dumps = set()  # directories of rollout dumps: one run each, as verl writes one a run
    for p in sorted(path.rglob("*.jsonl")):
        if is_rollout_dump(p):
            dumps.add(p.parent)
        else:
            found.append(Source(p, "jsonl"))
    found += [Source(d, "verl_rollouts") for d in sorted(dumps)]
    return found


def _number(value: object, source: Source) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        source.skip("not a number")
        return None
    value = float(value)
    if not math.isfinite(value):
        source.skip("not finite")
        return None
    return value


def _jsonl(source: Source) -> Iterator[Scalar]:
    with source.path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{source.path}:{number}: not JSON ({exc})") from None
            step = record.get("step") if isinstance(record, dict) else None
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ValueError(f"{source.path}:{number}: needs a whole-number 'step'")
            if isinstance(record.get("data"), dict):  # verl's file logger
                items = record["data"].items()
            elif isinstance(record.get("key"), str):  # Troupe's metrics.jsonl
                items = [(record["key"], record.get("value"))]
            else:
                raise ValueError(
                    f'{source.path}:{number}: expected verl\'s {{"step", "data"}} or '
                    'Troupe\'s {"step", "key", "value"}'
                )
            for key, value in items:
                if (value := _number(value, source)) is not None:
                    yield Scalar(str(key), step, value, None)


def _tensorboard(source: Source) -> Iterator[Scalar]:
    # Imported here: only the importer needs TensorBoard, never a web request.
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.util import tensor_util

    for path in sorted(source.path.glob(EVENT_GLOB)):
        for event in LegacyEventFileLoader(str(path)).Load():
            if not event.HasField("summary"):
                continue
            wall_ms = int(event.wall_time * 1000)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.HasField("tensor") and value.metadata.plugin_data.plugin_name in (
                    "scalars",
                    "",
                ):
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "fiub":
                        source.skip("not a scalar")
                        continue
                    number = array.item()
                else:
                    continue  # images, histograms, text: not scalars
                if (number := _number(number, source)) is not None:
                    yield Scalar(value.tag, int(event.step), number, wall_ms)
