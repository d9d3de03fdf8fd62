"""The §6 verdicts in words, for every page that shows them (run page, experiment page, the
run's live JSON): plain functions, which `templatetags/verdicts.py` registers as filters.

Each calls the one function of `analysis/` that owns the rule, so a verdict reads the same
wherever it appears: `cliff_label` for the cliff test, `capture_label` for capture,
`line_number` for every threshold and limit, and `cliff_line` for the threshold shown beside a
verdict — only where the run was judged, since a line at or below 0 ("below −0.005") is a
threshold nothing can cross.
"""

from __future__ import annotations

from analysis import cliffs
from analysis.runs import AccuracySummary, RunSummary


def _fields(accuracy) -> dict:
    """A summary's accuracy as the dict `analysis.cliffs` reads, whether the page holds the
    stored dict or an `AccuracySummary`."""
    if isinstance(accuracy, AccuracySummary):
        return accuracy.as_dict()
    return dict(accuracy or {})


def line_number(value) -> str:
    """A threshold, limit or the value that crossed it, rounded in this one place for every
    page (the radar's 0.0793 and the key results' 0.078 were one number): three
    decimals, or two significant digits below 0.01 (a gradient norm of 3e-05)."""
    if value is None or value == "":
        return "—"
    x = float(value)
    return f"{x:.3f}" if x == 0 or abs(x) >= 0.01 else f"{x:.2g}"


def cliff_label(accuracy) -> str:
    """ "cliff @140", "degradation @20", "cannot judge: accuracy too low", …"""
    return cliffs.cliff_label(_fields(accuracy))


def cliff_line(accuracy) -> str:
    """ "below 0.075" where the run was judged against that threshold, else ""."""
    acc = _fields(accuracy)
    if acc.get("threshold") is None or acc.get("cliff_status") in cliffs.UNJUDGED:
        return ""
    return f"below {line_number(acc['threshold'])}"


def capture_label(summary) -> str:
    """ "by generator", "no role", "not enough steps yet", or "" where capture is no
    question (one role, or per-role policies)."""
    read = RunSummary.of(summary)
    return {
        "captured": f"by {read.capture}",
        "none": "no role",
        "too_few_steps": "not enough steps yet",
    }.get(read.capture_status or "", "")


def event_name(kind: str) -> str:
    """A radar event's kind as the page's sentences say it: "non-finite loss", "entropy
    collapse", "voter collapse" (the code, which the alerts' filter takes, is on hover)."""
    return (kind or "").replace("non_finite", "non-finite").replace("_", " ")
