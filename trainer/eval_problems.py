"""A run's per-problem evaluation record, `eval_problems.jsonl`: standard library only.

Every evaluation of a run appends one `{"step", "per_problem"}` line: each held-out problem's
mean reward, in the order of the held-out problems (docs/design.md §5). A gain measured on
the same problems is judged against its paired, per-problem noise (the cliff threshold, §6),
and an attribution reuses a run's own evaluations as the corners of its table
(`webapp/attribution/planning.py`), so the web process reads this file too.
"""

from __future__ import annotations

import json
from pathlib import Path

PER_PROBLEM_FILE = "eval_problems.jsonl"


def record_per_problem(out_dir: str | Path, step: int, result: dict) -> None:
    """Append the evaluation's per-problem accuracies to the run's eval_problems.jsonl, one
    `{"step", "per_problem"}` a line (a step evaluated again on resume: the last line wins).
    A gain measured on the same problems is judged against its paired, per-problem noise."""
    line = json.dumps({"step": step, "per_problem": result["per_problem"]})
    with open(Path(out_dir) / PER_PROBLEM_FILE, "a") as fh:
        fh.write(line + "\n")


def read_per_problem(out_dir: str | Path) -> dict[int, list[float]]:
    """{step: per-problem accuracies} from the run's eval_problems.jsonl (last line wins)."""
    rows = {}
    with open(Path(out_dir) / PER_PROBLEM_FILE) as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows[int(row["step"])] = row["per_problem"]
    return rows
