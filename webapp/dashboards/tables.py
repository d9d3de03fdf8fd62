"""The panel's tables and CSV exports, built from summaries and series (no queries).

Each table is a list of row dicts with raw numbers, and two column lists reading the same
rows: `*_COLUMNS` for the on-screen DataTable (formatted, with links) and `*_CSV` for the
download (every number unrounded, intervals as two columns). So a CSV holds exactly what the
table shows, at full precision.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from dash.dash_table.Format import Format, Scheme, Sign

from webapp.dashboards import labels, state

_NUM = Format(precision=3, scheme=Scheme.fixed)
_SIGNED = Format(precision=3, scheme=Scheme.fixed, sign=Sign.positive)
_PCT = Format(precision=0, scheme=Scheme.percentage)


def _text(id_: str, name: str) -> dict:
    return {"id": id_, "name": name, "type": "text"}


def _number(id_: str, name: str, fmt: Format = _NUM) -> dict:
    return {"id": id_, "name": name, "type": "numeric", "format": fmt}


# --- matrix cells ---------------------------------------------------------------------------------

CELL_COLUMNS = [
    _text("workflow", "Workflow"),
    _text("task", "Task"),
    _text("model", "Model"),
    _text("sharing", "Sharing"),
    _number("n_seeds", "Seeds", Format(precision=0, scheme=Scheme.fixed)),
    _number("base_mean", "Base"),
    _number("peak_mean", "Peak"),
    _number("final_mean", "Final"),
    _number("gain_mean", "Gain", _SIGNED),
    _text("gain_ci", "Gain 95% CI"),
    _number("final_gain_mean", "Final gain", _SIGNED),
    _text("cliffs", "Cliffs"),
    {"id": "compare", "name": "Runs", "type": "text", "presentation": "markdown"},
]
CELL_CSV = [
    "workflow",
    "task",
    "model",
    "sharing",
    "n_seeds",
    "seeds",
    "base_mean",
    "peak_mean",
    "final_mean",
    "gain_mean",
    "gain_low",
    "gain_high",
    "final_gain_mean",
    "final_gain_low",
    "final_gain_high",
    "n_cliffs",
    "n_judged",
    "cliff_fraction",
    "runs",
]


def cell_rows(cells: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per matrix cell (a `cell_summaries` row), with a link to compare its runs."""
    rows = []
    for cell in cells:
        row = {k: cell.get(k) for k in CELL_CSV}
        row["seeds"] = " ".join(map(str, cell["seeds"]))
        row["runs"] = " ".join(map(str, cell["runs"]))
        row["gain_ci"] = _interval(cell["gain_low"], cell["gain_high"])
        row["cliffs"] = f"{cell['n_cliffs']} of {cell['n_judged']}" if cell["n_judged"] else "—"
        row["compare"] = f"[compare {len(cell['runs'])}]({state.compare_url(cell['runs'])})"
        rows.append(row)
    return rows


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None else f"{labels.signed(low, 3)} … {labels.signed(high, 3)}"


# --- runs (the curves view) -----------------------------------------------------------------------

RUN_COLUMNS = [
    _number("run", "Run", Format(precision=0, scheme=Scheme.fixed)),
    _text("cell", "Workflow · task · model"),
    _text("sharing", "Sharing"),
    _number("seed", "Seed", Format(precision=0, scheme=Scheme.fixed)),
    _text("status", "Status"),
    _number("base", "Base"),
    _number("peak", "Peak"),
    _number("peak_step", "Peak step", Format(precision=0, scheme=Scheme.fixed)),
    _number("final", "Final"),
    _number("gain", "Gain", _SIGNED),
    _number("final_gain", "Final gain", _SIGNED),
    _text("cliff", "Cliff"),
    _number("cliff_onset", "Cliff onset", Format(precision=0, scheme=Scheme.fixed)),
]
RUN_CSV = [
    "run",
    "workflow",
    "task",
    "model",
    "sharing",
    "seed",
    "status",
    "step",
    "total_steps",
    "base",
    "peak",
    "peak_step",
    "final",
    "gain",
    "final_gain",
    "cliff",
    "cliff_onset",
]


def run_rows(runs: Sequence, summaries: dict[int, dict]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        accuracy = (summaries.get(run.id) or {}).get("accuracy") or {}
        rows.append(
            {
                "run": run.id,
                "cell": labels.cell_label(run.workflow, run.task, run.model),
                "workflow": run.workflow,
                "task": run.task,
                "model": run.model,
                "sharing": run.sharing,
                "seed": run.seed,
                "status": run.status,
                "step": run.step,
                "total_steps": run.total_steps,
                **{k: accuracy.get(k) for k in ("base", "peak", "peak_step", "final")},
                **{k: accuracy.get(k) for k in ("gain", "final_gain", "cliff_onset")},
                "cliff": accuracy.get("cliff_status", "insufficient"),
            }
        )
    return rows


# --- gradient dynamics ----------------------------------------------------------------------------

DYNAMICS_COLUMNS = [
    _number("run", "Run", Format(precision=0, scheme=Scheme.fixed)),
    _text("cell", "Workflow · task · model"),
    _text("sharing", "Sharing"),
    _number("seed", "Seed", Format(precision=0, scheme=Scheme.fixed)),
    _text("role", "Role"),
    _number("amplification_onset", "Amplification onset", Format(precision=0, scheme=Scheme.fixed)),
    _number("cliff_onset", "Cliff onset", Format(precision=0, scheme=Scheme.fixed)),
    _number("lead", "Lead (steps)", Format(precision=0, scheme=Scheme.fixed, sign=Sign.positive)),
    _text("precedes", "Amplification precedes the cliff?"),
    _number("capture_fraction", "Share > 0.6 (last half)", _PCT),
    _text("captured", "Captured the shared policy?"),
]
DYNAMICS_CSV = [
    "run",
    "workflow",
    "task",
    "model",
    "sharing",
    "seed",
    "role",
    "amplification_onset",
    "cliff_onset",
    "lead",
    "precedes",
    "capture_fraction",
    "captured",
]


def dynamics_rows(runs: Sequence, summaries: dict[int, dict]) -> list[dict[str, Any]]:
    """One row per (run, role): when the role's gradient norm amplified, how far ahead of the
    cliff (`lead`), and for shared runs whether the role captured the policy."""
    rows = []
    for run in runs:
        summary = summaries.get(run.id) or {}
        cliff = (summary.get("accuracy") or {}).get("cliff_onset")
        shared = run.sharing == "shared"
        fractions = summary.get("capture_fractions") or {}
        for role in summary.get("roles") or [None]:
            onset = (summary.get("amplification") or {}).get(role)
            lead = (summary.get("lead") or {}).get(role)
            rows.append(
                {
                    "run": run.id,
                    "cell": labels.cell_label(run.workflow, run.task, run.model),
                    "workflow": run.workflow,
                    "task": run.task,
                    "model": run.model,
                    "sharing": run.sharing,
                    "seed": run.seed,
                    "role": role or "—",
                    "amplification_onset": onset,
                    "cliff_onset": cliff,
                    "lead": lead,
                    "precedes": _precedes(cliff, onset, lead),
                    "capture_fraction": fractions.get(role) if shared else None,
                    "captured": _captured(summary, role) if shared else "— (own policy)",
                }
            )
    return rows


def _precedes(cliff, onset, lead) -> str:
    if cliff is None:
        return "— no cliff"
    if onset is None:
        return "no: never amplified"
    if lead > 0:
        return f"yes, by {lead} steps"
    return "no: same step" if lead == 0 else f"no: {-lead} steps after"


def _captured(summary: dict, role: str | None) -> str:
    if role is None:
        return "—"
    return "yes" if summary.get("capture") == role else "no"


def dynamics_findings(runs: Sequence, summaries: dict[int, dict]) -> list[str]:
    """The two questions of the gradient view, answered in a sentence each for these runs."""
    findings = []
    cliffs = [
        r
        for r in runs
        if ((summaries.get(r.id) or {}).get("accuracy") or {}).get("cliff_onset") is not None
    ]
    if not cliffs:
        findings.append("None of these runs has a terminal cliff, so there is no lead to measure.")
    else:
        ahead = []
        for run in cliffs:
            leads = {
                role: lead
                for role, lead in ((summaries[run.id].get("lead") or {}).items())
                if lead is not None and lead > 0
            }
            if leads:
                role = max(leads, key=leads.get)
                ahead.append(f"run {run.id}: {role} by {leads[role]} steps")
        findings.append(
            f"Amplification precedes the cliff in {len(ahead)} of {len(cliffs)} run(s) with a "
            "terminal cliff" + (f" ({'; '.join(ahead)})." if ahead else ".")
        )
    shared = [r for r in runs if r.sharing == "shared"]
    if shared:
        captured = [
            f"run {r.id}: {summaries[r.id]['capture']}"
            for r in shared
            if (summaries.get(r.id) or {}).get("capture")
        ]
        findings.append(
            f"A role captured the shared policy in {len(captured)} of {len(shared)} shared run(s)"
            + (f" ({'; '.join(captured)})." if captured else ".")
        )
    return findings


# --- CSV -----------------------------------------------------------------------------------------


def to_csv(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """CSV text with one header line; None becomes an empty field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return out.getvalue()


SERIES_CSV = ["run", "workflow", "task", "model", "sharing", "seed", "key", "step", "value"]


def series_csv(runs: Sequence, series: dict[int, dict[str, dict]]) -> str:
    """Long-format CSV of the series as plotted (downsampled): one line per point."""
    rows = []
    for run in runs:
        for key, points in sorted(series.get(run.id, {}).items()):
            for step, value in zip(points["steps"], points["values"], strict=True):
                rows.append(
                    {
                        "run": run.id,
                        "workflow": run.workflow,
                        "task": run.task,
                        "model": run.model,
                        "sharing": run.sharing,
                        "seed": run.seed,
                        "key": key,
                        "step": step,
                        "value": value,
                    }
                )
    return to_csv(rows, SERIES_CSV)
