"""The panel's tables and CSV exports, built from summaries and series (no queries).

Each table is a list of row dicts with raw numbers, and two column lists reading the same
rows: `*_COLUMNS` for the table on screen (id, heading, how to show the value; rendered by
`components.table`) and `*_CSV` for the download (every number unrounded, intervals as two
columns). So a CSV holds what the table shows, at full precision.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any, NamedTuple

from analysis.amplification import amplification_label
from analysis.cells import CellSummary
from analysis.runs import RunSummary
from vocabulary.names import CELL_AXES, MATRIX_AXES, SHARED
from webapp.dashboards import labels, state


class Column(NamedTuple):
    id: str
    name: str
    kind: str = "text"  # text, int, num (3 decimals), signed (+0.123), step (+12), pct, link


def show(value: Any, kind: str) -> str:
    """A table cell's text: numbers rounded for the eye, None as a dash."""
    if value is None or value == "":
        return "—"
    if kind == "int":
        return f"{value:d}" if isinstance(value, int) else str(value)
    if kind == "num":
        return f"{value:.3f}"
    if kind == "signed":
        return f"{value:+.3f}"
    if kind == "step":
        return f"{value:+d}" if isinstance(value, int) else f"{value:+g}"
    if kind == "pct":
        return f"{value:.0%}"
    return str(value)


def cell_class(column: Column, row: dict) -> str:
    """CSS classes of one table cell: numbers right-aligned, verdicts in red or green."""
    value = row.get(column.id)
    if column.id == "cliff" and row.get("cliff_status") in ("cliff", "provisional"):
        return "bad"
    if column.id == "cliffs" and (row.get("n_cliffs") or row.get("n_degraded")):
        return "bad"
    if column.id in ("precedes", "captured") and str(value).startswith("yes"):
        return "good"
    return "" if column.kind in ("text", "link") else "number"


# --- matrix cells ---------------------------------------------------------------------------------

CELL_COLUMNS = [
    Column("workflow", "Workflow"),
    Column("task", "Task"),
    Column("model", "Model"),
    Column("sharing", "Sharing"),
    Column("n_seeds", "Seeds", "int"),
    Column("base_mean", "Base", "num"),
    Column("peak_mean", "Peak", "num"),
    Column("final_mean", "Final", "num"),
    Column("gain_mean", "Gain", "signed"),
    Column("gain_ci", "Gain 95% CI"),
    Column("final_gain_mean", "Final gain", "signed"),
    Column("cliffs", "Cliffs"),
    Column("compare", "Runs", "link"),
]
CELL_CSV = [
    *CELL_AXES,
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
    "n_degraded",
    "cliff_fraction",
    "runs",
]


def cell_rows(cells: Sequence[CellSummary]) -> list[dict[str, Any]]:
    """One row per matrix cell (a `cell_summaries` cell), with a link to compare its runs."""
    rows = []
    for cell in cells:
        fields = cell.as_dict()  # the CSV's columns are the cell's plain-dict keys
        row = {k: fields.get(k) for k in CELL_CSV}
        row["seeds"] = " ".join(map(str, cell.seeds))
        row["runs"] = " ".join(map(str, cell.runs))
        row["gain_ci"] = _interval(cell.gain.low, cell.gain.high)
        row["cliffs"] = cell.cliffs_text
        row["compare"] = (f"compare {len(cell.runs)} →", state.compare_url(cell.runs))
        rows.append(row)
    return rows


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None else f"{labels.signed(low, 3)} … {labels.signed(high, 3)}"


# --- runs (the curves view) -----------------------------------------------------------------------

RUN_COLUMNS = [
    Column("run", "Run", "int"),
    Column("cell", "Workflow · task · model"),
    Column("sharing", "Sharing"),
    Column("seed", "Seed", "int"),
    Column("status", "Status"),
    Column("base", "Base", "num"),
    Column("peak", "Peak", "num"),
    Column("peak_step", "Peak step", "int"),
    Column("final", "Final", "num"),
    Column("gain", "Gain", "signed"),
    Column("final_gain", "Final gain", "signed"),
    Column("cliff", "Cliff"),
    Column("onset", "Cliff / degradation onset", "int"),
    Column("cliff_threshold", "Cliff threshold", "num"),
]
RUN_CSV = [
    "run",
    *MATRIX_AXES,
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
    "cliff_status",
    "cliff_onset",
    "cliff_threshold",
    "cliff_evidence",
]


def run_rows(runs: Sequence, summaries: dict[int, dict]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        accuracy = RunSummary.of(summaries.get(run.id)).accuracy
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
                **{k: getattr(accuracy, k) for k in ("base", "peak", "peak_step", "final")},
                **{k: getattr(accuracy, k) for k in ("gain", "final_gain", "cliff_onset")},
                # The verdict in words, as the run and experiment pages say it (one label
                # function: `analysis.cliffs.cliff_label`); the code stays in the CSV.
                "cliff": accuracy.label,
                "cliff_status": accuracy.cliff_status,
                # The onset of whichever fall the verdict names: a degradation has one too, as
                # the run page says "degradation @2".
                "onset": accuracy.cliff_onset
                if accuracy.cliff_onset is not None
                else accuracy.degradation_onset,
                # The threshold in use beside the verdict, the evidence on hover;
                # none where the run was not judged (a line at or below 0 cannot be crossed).
                "cliff_threshold": accuracy.threshold if accuracy.judged else None,
                "cliff_evidence": accuracy.evidence,
                "cliff_title": accuracy.evidence,
            }
        )
    return rows


# --- gradient dynamics ----------------------------------------------------------------------------

DYNAMICS_COLUMNS = [
    Column("run", "Run", "int"),
    Column("cell", "Workflow · task · model"),
    Column("sharing", "Sharing"),
    Column("seed", "Seed", "int"),
    Column("role", "Role"),
    Column("amplification", "Amplification onset"),
    Column("cliff_onset", "Cliff onset", "int"),
    Column("lead", "Lead (steps)", "step"),
    Column("precedes", "Amplification precedes the cliff?"),
    Column("capture_fraction", "Share > 0.6 in the last half", "pct"),
    Column("captured", "Captured the shared policy?"),
]
DYNAMICS_CSV = [
    "run",
    *MATRIX_AXES,
    "role",
    "amplification_onset",
    "amplification_status",
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
        summary = RunSummary.of(summaries.get(run.id))
        cliff = summary.accuracy.cliff_onset
        evidence = summary.accuracy.evidence
        shared = _shares_a_policy(run, summary)
        fractions = summary.capture_fractions
        for role in summary.roles or [None]:
            onset = summary.amplification.get(role)
            lead = summary.lead.get(role)
            status = summary.amplification_status.get(role)
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
                    # "not amplified" and "too few steps to judge" were both "—".
                    "amplification": amplification_label(status, onset),
                    "amplification_status": status,
                    "cliff_onset": cliff,
                    "cliff_onset_title": evidence,
                    "lead": lead,
                    "precedes": _precedes(cliff, onset, lead, status),
                    "capture_fraction": fractions.get(role) if shared else None,
                    "captured": _captured(summary, role) if shared else "— (own policy)",
                    "captured_title": _capture_rule(summary, role) if shared else None,
                }
            )
    return rows


def _precedes(cliff, onset, lead, status: str | None = None) -> str:
    if cliff is None:
        return "— no cliff"
    if onset is None and status == "too_few_steps":
        return "— too few steps to judge amplification"
    if onset is None:
        return "no: never amplified"
    if lead > 0:
        return f"yes, by {lead} steps"
    return "no: same step" if lead == 0 else f"no: {-lead} steps after"


def _shares_a_policy(run, summary: RunSummary) -> bool:
    """Capture is a question only where two or more roles put gradient on one policy."""
    return run.sharing == SHARED and len(summary.roles) >= 2


def _capture_rule(summary: RunSummary, role: str | None) -> str:
    share = summary.capture_fractions.get(role)
    seen = "no share logged" if share is None else f"{share:.0%} of them"
    return f"captures when its grad_share > 0.6 in most steps of the last half ({seen})"


def _captured(summary: RunSummary, role: str | None) -> str:
    if role is None:
        return "—"
    if summary.capture_status == "too_few_steps":
        return "— not enough steps yet"  # the one minimum of evidence (analysis.capture)
    return "yes" if summary.capture == role else "no"


def dynamics_findings(runs: Sequence, summaries: dict[int, dict]) -> list[str]:
    """The two questions of the gradient view, answered in a sentence each for these runs."""
    findings = []
    read = {run.id: RunSummary.of(summaries.get(run.id)) for run in runs}

    # A question is answered only over the runs with data for it: before any evaluation or
    # gradient point, "0 of 1" would read as a finding.
    judged = [r for r in runs if read[r.id].accuracy.judged]
    cliffs = [r for r in judged if read[r.id].accuracy.cliff_onset is not None]
    if not judged:
        findings.append(
            "No run has enough evaluations for a cliff verdict yet, so there is no lead to measure."
        )
    elif not cliffs:
        findings.append("None of these runs has a terminal cliff, so there is no lead to measure.")
    else:
        ahead = []
        for run in cliffs:
            leads = {
                role: lead
                for role, lead in read[run.id].lead.items()
                if lead is not None and lead > 0
            }
            if leads:
                role = max(leads, key=leads.get)
                ahead.append(f"run {run.id}: {role} by {leads[role]} steps")
        findings.append(
            f"Amplification precedes the cliff in {len(ahead)} of {len(cliffs)} run(s) with a "
            "terminal cliff" + (f" ({'; '.join(ahead)})." if ahead else ".")
        )
    # Runs where capture may be a question: shared, and not known to have a single role (a run
    # that has logged nothing yet has no roles to count).
    shared = [r for r in runs if r.sharing == SHARED and len(read[r.id].roles) != 1]
    logged = [r for r in shared if read[r.id].capture_fractions]
    early = [r for r in shared if read[r.id].capture_status == "too_few_steps"]
    if shared and not logged and early:
        findings.append(
            "No shared run has logged enough steps yet (10 with gradient shares), so capture "
            "is not judged."
        )
    elif shared and not logged:
        findings.append("No shared run has logged gradient shares yet, so capture is not judged.")
    shared = [r for r in logged if _shares_a_policy(r, read[r.id])]
    if shared:
        captured = [f"run {r.id}: {read[r.id].capture}" for r in shared if read[r.id].capture]
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


SERIES_CSV = ["run", *MATRIX_AXES, "key", "step", "value"]


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
