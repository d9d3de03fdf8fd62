"""verl's rollout dumps as Troupe episodes, for `manage.py import_runs`.

verl (`trainer.rollout_data_dir`, and `trainer.validation_data_dir` for validation) writes one
file a step, `<dir>/<global step>.jsonl`, one JSON object a sample (its
`RayPPOTrainer._dump_generations`): `input` (the decoded prompt), `output` (the decoded
response), `score` (the sequence's reward), `step`, in newer versions `gts` (the ground
truth), and every column of the reward function's `reward_extra_info` of that length (e.g.
`acc`, `pred`). Nothing else is dumped: no token ids, log-probs, advantages, group ids or
truncation flags.

So an imported episode is one turn of role `solver` (verl trains one policy on one prompt
and response). What the fields allow:

- `step` from the line (else the file's name, when it is a number); `index` the line's
  position among the step's lines, in file order.
- `problem_id`: the first 16 hex digits of the prompt's SHA-256 (verl dumps no id, and a
  GRPO group's samples share their prompt); `sample`: how many earlier lines of the step
  had that prompt (the position in its group).
- `reward` = the turn's reward = `score`; `correct` = `acc` when the line has a boolean or
  numeric `acc`, else `score` > 0.5 (verl's rule-based rewards give 1 for a right answer);
  `answer` = `pred` when it is text.
- token counts, mean log-prob, advantage and truncation: None (not in the dump); the other
  columns (`gts`, extra reward info) are kept under `extra`, each cut to 2,000 characters of
  JSON.

A line that is not JSON, not an object, lacks `input`/`output` text, has a `score` that is not
a finite number or a `step` that is not a whole number is an error naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer.episode_log import safe_text

ROLE = "solver"
POLICY = "actor"
EXTRA_CHARS = 2000


def is_rollout_dump(path: Path) -> bool:
    """Whether `path`'s first non-blank line looks like verl's rollout dump (an object with
    `input` and `output`); a line that is not JSON says no (the other readers name it)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.strip():
                    record = json.loads(line)
                    return isinstance(record, dict) and "input" in record and "output" in record
    except (OSError, ValueError):
        return False
    return False


def rollout_files(path: Path) -> list[Path]:
    """A dump file itself, or a directory's `*.jsonl` dump files in step order."""
    if path.is_file():
        return [path]
    files = [p for p in path.glob("*.jsonl") if is_rollout_dump(p)]
    numbered = sorted((p for p in files if p.stem.isdecimal()), key=lambda p: int(p.stem))
    return numbered + sorted(p for p in files if not p.stem.isdecimal())


def rollout_records(path: Path, kind: str = "train") -> Iterator[dict[str, Any]]:
    """Episode records (trainer/episode_log.py's shape) of a dump file or directory."""
    counts: dict[int, int] = {}  # step -> lines so far
    seen: dict[tuple[int, str], int] = {}  # (step, problem) -> samples so far
    for file in rollout_files(path):
        with file.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                where = f"{file}:{number}"
                record = _parse(line, where)
                step = _step(record, file, where)
                problem = hashlib.sha256(record["input"].encode()).hexdigest()[:16]
                index = counts.get(step, 0)
                counts[step] = index + 1
                sample = seen.get((step, problem), 0)
                seen[(step, problem)] = sample + 1
                yield _episode(record, kind, step, index, problem, sample, where)


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, not {type(record).__name__}")
    for name in ("input", "output"):
        if not isinstance(record.get(name), str):
            raise ValueError(f"{where}: a verl rollout line needs {name!r} text")
    return record


def _step(record: dict[str, Any], file: Path, where: str) -> int:
    step = record.get("step")
    if step is None and file.stem.isdecimal():
        return int(file.stem)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"{where}: 'step' must be a whole number, not {step!r}")
    return step


def _score(record: dict[str, Any], where: str) -> float | None:
    score = record.get("score")
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise ValueError(f"{where}: 'score' must be a finite number, not {score!r}")
    return float(score)


def _extra(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= EXTRA_CHARS else text[:EXTRA_CHARS] + " …"


def _episode(record, kind, step, index, problem, sample, where) -> dict[str, Any]:
    score = _score(record, where)
    acc = record.get("acc")
    if isinstance(acc, bool | int | float) and not (isinstance(acc, float) and math.isnan(acc)):
        correct = bool(acc)
    else:
        correct = score is not None and score > 0.5
    pred = record.get("pred")
    known = {"input", "output", "score", "step", "acc", "pred"}
    extra = {str(k): _extra(v) for k, v in record.items() if k not in known}
    if acc is not None:
        extra["acc"] = _extra(acc)
    return {
        "kind": kind,
        "step": step,
        "index": index,
        "problem_id": problem,
        "sample": sample,
        "answer": safe_text(pred) if isinstance(pred, str) else None,
        "reward": score,
        "correct": correct,
        "malformed": {},
        "source": "verl rollout dump",
        "extra": extra,
        "turns": [
            {
                "role": ROLE,
                "agent": ROLE,
                "policy": POLICY,
                "stage": 0,
                "prompt": safe_text(record["input"]),
                "completion": safe_text(record["output"]),
                "prompt_tokens": None,
                "completion_tokens": None,
                "logprob_mean": None,
                "reward": score,
                "advantage": None,
                "score": None,
                "truncated": None,
            }
        ],
    }
