"""docs/design.md §6 for run directories, as a table or JSON (`python -m trainer analyze DIR…`,
whose command line is in trainer/cli.py).

A run directory holds `config.json` (the run's flat config) and `metrics.jsonl` (one
`{"step", "key", "value"}` object a line, as `trainer.reporting.JsonlReporter` writes it).
`analyze_dirs` summarises each with `analysis.runs.summarize_run`; `format_report` prints
one row per run, and, when some matrix cell has several seeds, one row per cell. The numbers
are the ones the web pages and the Dash panel show: all come from `analysis`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from analysis.cells import CellSummary, Estimate, summarize_cells
from analysis.cliffs import POSSIBLE, POSSIBLE_LABEL
from analysis.runs import summarize_run
from trainer.reporting import read_metrics_jsonl
from vocabulary.names import CELL_AXES


def _read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}  # the metrics alone still give every number; only the cell is unknown
    data = json.loads(path.read_text())
    if isinstance(data.get("config"), dict):  # tolerate a wrapped {"config": {...}} file
        data = data["config"]
    return data


def analyze_dir(path: str | Path, *, running: bool | None = None, **thresholds: Any) -> dict:
    """One run directory → `{"dir", "name", "cell", "seed", "complete", "last_step",
    "summary"}`, or `{"dir", "name", "error"}` when it cannot be read.

    `complete` is judged from the config: the last logged step reached `steps − 1`. An
    incomplete run (still training, or stopped early) is summarised with `running=True`, so
    it gets at most a provisional cliff. Pass `running` to override the judgement.
    """
    path = Path(path)
    result: dict[str, Any] = {"dir": str(path), "name": path.resolve().name}
    metrics = path / "metrics.jsonl"
    if not metrics.exists():
        return {**result, "error": f"no metrics.jsonl in {path}"}
    try:
        config = _read_config(path / "config.json")
        series = read_metrics_jsonl(metrics)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {**result, "error": f"cannot read {path}: {exc}"}

    last_step = max((max(steps) for steps, _ in series.values() if steps), default=None)
    planned = config.get("steps")
    complete = planned is None or (last_step is not None and last_step >= int(planned) - 1)
    if running is None:
        running = not complete
    try:
        summary = summarize_run(
            series,
            running=running,
            sharing=config.get("sharing"),
            per_problem=_per_problem(path),
            **thresholds,
        )
    except ValueError as exc:
        return {**result, "error": f"cannot analyse {path}: {exc}"}
    return {
        **result,
        "cell": {axis: config.get(axis) for axis in CELL_AXES},
        "seed": config.get("seed"),
        "complete": complete,
        "last_step": last_step,
        "summary": summary,
    }


def analyze_dirs(
    paths: Iterable[str | Path], *, running: bool | None = None, **thresholds: Any
) -> list[dict]:
    """`analyze_dir` for each path, in order. Results feed `format_report` and, being the
    `{"cell", "seed", "summary"}` shape, `analysis.cells.summarize_cells` directly."""
    return [analyze_dir(p, running=running, **thresholds) for p in paths]


# --- text report -------------------------------------------------------------------------------


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]


def _per_problem(path: Path) -> dict[int, list[float]] | None:
    """{step: per-problem accuracies} from the run's eval_problems.jsonl (written by
    `trainer.evaluate.record_per_problem`; a step's last line wins), None without one. Read
    here rather than through trainer.evaluate, which imports torch."""
    file = path / "eval_problems.jsonl"
    if not file.exists():
        return None
    rows: dict[int, list[float]] = {}
    try:
        for line in file.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[int(row["step"])] = row["per_problem"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # the cliff test falls back to eval/accuracy_se
    return rows


def _cliff_text(acc: dict) -> str:
    status = acc["cliff_status"]
    below = f" (< {acc['threshold']:.3f})" if acc.get("threshold") is not None else ""
    if status in ("cliff", "provisional"):
        return f"{'yes' if status == 'cliff' else 'provisional'} @{acc['cliff_onset']}{below}"
    if status == "degradation":
        return f"degradation @{acc['degradation_onset']}{below}"
    if status == "too_low":
        return "cannot judge: accuracy too low"  # the line is at or below 0 (docs/analysis.md)
    if status == POSSIBLE:
        return POSSIBLE_LABEL  # a large fall, too few evaluations to confirm it
    return ("no" + below) if status == "none" else "too few evals"


def _role_line(summary: dict) -> str:
    parts = []
    for role in summary["roles"]:
        onset, lead = summary["amplification"].get(role), summary["lead"].get(role)
        text = f"{role} {'@' + str(onset) if onset is not None else 'never'}"
        if lead is not None:
            text += f" (lead {lead:+g})"
        parts.append(text)
    return "amplification: " + (", ".join(parts) if parts else "no per-role gradients logged")


def format_report(results: list[dict], *, as_json: bool = False) -> str:
    """A human-readable report (runs table, per-run amplification lines, then a cells table
    when a cell has several seeds), or with `as_json` one JSON object `{"runs", "cells"}`."""
    ok = [r for r in results if "summary" in r]
    cells = summarize_cells(ok)
    if as_json:
        return json.dumps({"runs": results, "cells": [c.as_dict() for c in cells]}, indent=2)

    header = ["run", *CELL_AXES, "seed", "evals", "base", "peak", "@step", "final", "gain"]
    header += ["final_gain", "cliff", "capture"]
    rows, details = [], []
    for r in ok:
        rows.append(_run_row(r))
        details.append(f"{r['name']}: {_role_line(r['summary'])}")
    lines = _table(header, rows) if rows else ["no runs to analyse"]
    if details:
        lines += ["", *details]
    for r in results:
        if "error" in r:
            lines.append(f"error: {r['error']}")

    if any(c.n_seeds > 1 for c in cells):
        header = [*CELL_AXES, "seeds", "gain [95% CI]", "final_gain [95% CI]", "cliffs", "capture"]
        rows = [_cell_row(c) for c in cells]
        lines += ["", *_table(header, rows)]
    return "\n".join(lines)


def _text(x: Any) -> str:
    return "-" if x is None else str(x)


def _run_row(r: dict) -> list[str]:
    acc, cell = r["summary"]["accuracy"], r["cell"]
    return [
        r["name"] + ("" if r["complete"] else " (incomplete)"),
        *(_text(cell[a]) for a in CELL_AXES),
        _text(r["seed"]),
        str(acc["n_evals"]),
        _f(acc["base"]),
        _f(acc["peak"]),
        _text(acc["peak_step"]),
        _f(acc["final"]),
        _f(acc["gain"], signed=True),
        _f(acc["final_gain"], signed=True),
        _cliff_text(acc),
        _text(r["summary"]["capture"]),
    ]


def _cell_row(c: CellSummary) -> list[str]:
    captured = _text(c.capture)
    if c.capture_counts:
        captured += " (" + ", ".join(f"{k} {v}" for k, v in c.capture_counts.items()) + ")"
    return [
        *(_text(getattr(c, a)) for a in CELL_AXES),
        str(c.n_seeds),
        _ci_text(c.gain),
        _ci_text(c.final_gain),
        c.cliffs_text,
        captured,
    ]


def _ci_text(estimate: Estimate) -> str:
    mean, low, high = estimate.mean, estimate.low, estimate.high
    if low is None:
        return _f(mean, True)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"
