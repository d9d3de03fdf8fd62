"""Each run's verdicts as the explorer filters and sorts them, kept in `RunVerdict`.

A verdict is `analysis.runs.summarize_run` of the run's series (through
`webapp.runs.summaries`, so it reads as on every other page), reduced to one word or number
a column: `peak`, `final`, `gain` of `eval/accuracy`, `cliff_status`, `capture` (the capture
status) and `amplification` ("amplified" when any role is, else the first status found).

A stored row is used while its fingerprint — the run's status, last step, step count and
sharing, read with the run itself — still matches; otherwise the run is summarised again
and the row rewritten. So a table over 10,000 finished runs reads 10,000 small rows, and a
run that trains summarises again only as its steps advance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import CharField, F, Q, QuerySet, Value
from django.db.models.functions import Cast, Concat

from analysis.runs import RunSummary
from webapp.experiments.models import Run
from webapp.explorer.models import RunVerdict
from webapp.runs.summaries import run_summaries

FIELDS = ("peak", "final", "gain", "cliff_status", "capture", "amplification")
NUMBERS = ("peak", "final", "gain")


def fingerprint(row: Mapping[str, Any]) -> str:
    """What a verdict depends on that the run's own row shows (`row`: its column values)."""
    return "|".join(str(row.get(k)) for k in ("status", "step", "total_steps", "sharing"))


def _fingerprint_expression() -> Concat:
    """`fingerprint` computed by the database, for finding stale rows without reading runs."""
    parts = [F("status"), Cast("step", CharField()), Cast("total_steps", CharField()), F("sharing")]
    joined = []
    for part in parts:
        joined += [part, Value("|")]
    return Concat(*joined[:-1], output_field=CharField())


def refresh_stale(runs: QuerySet) -> int:
    """Summarise again the runs of `runs` whose stored verdict is missing or stale; how many.
    One query finds them (the fingerprint compared in the database)."""
    stale = runs.annotate(_fingerprint=_fingerprint_expression()).filter(
        Q(verdict__isnull=True) | ~Q(verdict__fingerprint=F("_fingerprint"))
    )
    rows = list(stale.values("id", "status", "step", "total_steps", "sharing"))
    wanted = {row["id"]: fingerprint(row) for row in rows}
    ids = list(wanted)
    for start in range(0, len(ids), 500):
        _refresh(ids[start : start + 500], wanted)
    return len(ids)


def reduce(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """The columns of one `summarize_run` result."""
    s = RunSummary.of(summary)
    statuses = list(s.amplification_status.values())
    amplification = "amplified" if "amplified" in statuses else (statuses[0] if statuses else "")
    return {
        "peak": s.accuracy.peak,
        "final": s.accuracy.final,
        "gain": s.accuracy.gain,
        "cliff_status": s.accuracy.cliff_status or "",
        "capture": s.capture_status or "",
        "amplification": amplification,
    }


def verdicts(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """`{run id: {field: value}}` for the runs of `rows` (dicts with `id` and the fingerprint's
    fields), computing and storing those whose stored row is missing or stale."""
    rows = list(rows)
    wanted = {row["id"]: fingerprint(row) for row in rows}
    stored = {
        v.run_id: v for v in RunVerdict.objects.filter(run_id__in=list(wanted)).iterator(2000)
    }
    out = {
        run_id: {f: getattr(v, f) for f in FIELDS}
        for run_id, v in stored.items()
        if v.fingerprint == wanted[run_id]
    }
    stale = [run_id for run_id in wanted if run_id not in out]
    for start in range(0, len(stale), 500):
        out.update(_refresh(stale[start : start + 500], wanted))
    return out


def _refresh(run_ids: list[int], wanted: dict[int, str]) -> dict[int, dict[str, Any]]:
    runs = list(Run.objects.filter(id__in=run_ids).only("id", "status", "sharing", "total_steps"))
    fresh = {run_id: reduce(s) for run_id, s in run_summaries(runs).items()}
    # Two requests may refresh one run at once: both computed the same row, the later wins.
    RunVerdict.objects.bulk_create(
        [RunVerdict(run_id=i, fingerprint=wanted[i], **values) for i, values in fresh.items()],
        update_conflicts=True,
        unique_fields=["run"],
        update_fields=["fingerprint", *FIELDS],
    )
    return fresh
