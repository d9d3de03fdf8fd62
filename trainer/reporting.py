"""How training code talks to the outside world: a small reporter interface.

The loop calls `log`, `should_stop`, `on_checkpoint`, `on_progress`, `on_status` and `line`; it
never knows whether the numbers go to a list (tests), a JSONL file (the CLI) or the database
(the Celery worker, which implements the same six methods in `workers/`).

`on_status(text)` says what the run is doing outside its training steps, for a person watching
it: loading its model, warm-starting a tiny model on first use (minutes, with the percentage:
"Preparing model tiny-s: warm start 40%"), evaluating the base model; "" once the steps begin.
`line(text)` is one line for the run's log (why a run stopped early, `stop_after_cliff`).
`log_episodes(step, records)` takes recorded episodes, plain JSON dicts
(`trainer/episode_log.py`); a step's records come before its checkpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol


class Reporter(Protocol):
    def log(self, step: int, metrics: dict[str, float]) -> None: ...

    def should_stop(self) -> bool: ...

    def on_checkpoint(self, step: int, path: str) -> None: ...

    def on_progress(self, step: int, total: int, info: dict[str, Any]) -> None: ...

    def on_status(self, text: str) -> None: ...

    def line(self, text: str) -> None: ...

    def log_episodes(self, step: int, records: list[dict[str, Any]]) -> None: ...


class NullReporter:
    """Discards everything; never asks to stop."""

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def should_stop(self) -> bool:
        return False

    def on_checkpoint(self, step: int, path: str) -> None:
        pass

    def on_progress(self, step: int, total: int, info: dict[str, Any]) -> None:
        pass

    def on_status(self, text: str) -> None:
        pass

    def line(self, text: str) -> None:
        pass

    def log_episodes(self, step: int, records: list[dict[str, Any]]) -> None:
        pass


class ListReporter(NullReporter):
    """Keeps every point in memory (tests); `stop_after` simulates a cancel at a step."""

    def __init__(self, stop_after: int | None = None):
        self.points: list[tuple[int, str, float]] = []
        self.checkpoints: list[tuple[int, str]] = []
        self.progress: list[tuple[int, int, dict]] = []
        self.statuses: list[str] = []
        self.lines: list[str] = []
        self.episodes: list[dict[str, Any]] = []
        self.stop_after = stop_after

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.points.extend((step, k, float(v)) for k, v in metrics.items())

    def should_stop(self) -> bool:
        logged = max((step for step, _, _ in self.points), default=-1)
        return self.stop_after is not None and logged >= self.stop_after

    def on_checkpoint(self, step: int, path: str) -> None:
        self.checkpoints.append((step, path))

    def on_progress(self, step: int, total: int, info: dict[str, Any]) -> None:
        self.progress.append((step, total, dict(info)))

    def on_status(self, text: str) -> None:
        self.statuses.append(text)

    def line(self, text: str) -> None:
        self.lines.append(text)

    def log_episodes(self, step: int, records: list[dict[str, Any]]) -> None:
        self.episodes.extend(records)

    def series(self, key: str) -> tuple[list[int], list[float]]:
        pairs = sorted((s, v) for s, k, v in self.points if k == key)
        return [s for s, _ in pairs], [v for _, v in pairs]

    def keys(self) -> set[str]:
        return {k for _, k, _ in self.points}


class JsonlReporter(NullReporter):
    """Appends `{"step", "key", "value"}` lines to metrics.jsonl (the CLI's output format),
    and recorded episodes, one a line, to episodes.jsonl beside it.

    On resume the files may already hold points and episodes past the checkpoint;
    `truncate_after` drops them first so every (key, step) and episode appears exactly once.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.episodes_path = self.path.parent / "episodes.jsonl"

    def truncate_after(self, step: int) -> None:
        for path in (self.path, self.episodes_path):
            if not path.exists():
                continue
            kept = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line)["step"] <= step
            ]
            path.write_text("".join(line + "\n" for line in kept))

    def log_episodes(self, step: int, records: list[dict[str, Any]]) -> None:
        with self.episodes_path.open("a") as fh:
            for record in records:
                fh.write(json.dumps(record) + "\n")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        with self.path.open("a") as fh:
            for key, value in metrics.items():
                value = float(value)
                if math.isnan(value) or math.isinf(value):
                    value = None  # JSON has no NaN; readers treat null as missing
                fh.write(json.dumps({"step": step, "key": key, "value": value}) + "\n")


def read_metrics_jsonl(path: str | Path) -> dict[str, tuple[list[int], list[float]]]:
    """metrics.jsonl → {key: (steps, values)}, the shape `analysis` takes."""
    series: dict[str, dict[int, float]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            point = json.loads(line)
            value = point["value"]
            series.setdefault(point["key"], {})[int(point["step"])] = (
                float("nan") if value is None else float(value)
            )
    return {k: (sorted(v), [v[s] for s in sorted(v)]) for k, v in series.items()}
