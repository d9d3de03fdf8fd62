"""The seed-bands page's run table: one row per run, with the config fields that tell the
selected runs apart as columns and each run's held-out accuracy results (peak, final, cliff,
from `analysis` summaries); sortable by any column.

Rows hold raw values (numbers stay numbers), so sorting is numeric where the column is;
`components.render_table` formats them. No queries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.runs import RunSummary
from vocabulary.names import MATRIX_AXES
from webapp.dashboards.tables import Column

# Shown even when every selected run has the same value: what a reader looks for first.
CORE_FIELDS = MATRIX_AXES
RESULT_COLUMNS = [
    Column("status", "Status"),
    Column("peak", "Peak", "num"),
    Column("peak_step", "Peak step", "int"),
    Column("final", "Final", "num"),
    Column("cliff", "Cliff"),
    Column("onset", "Cliff / degradation onset", "int"),
]


def _shown(value: Any) -> Any:
    """A config value as a cell: numbers and text as they are, lists and dicts as JSON."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


BRANCH_COLUMN = Column("branch_of", "Branch of")  # "#12 @20": branches are not seeds


def columns(fields: Sequence[str], group_by: str = "", branches: bool = False) -> list[Column]:
    """Run, then the group-by field, the other config `fields`, whose branch each run is
    (when any is one), then the results."""
    config = [group_by] if group_by else []
    config += [f for f in fields if f != group_by]
    kinds = {"seed": "int"}
    return (
        [Column("run", "Run", "int")]
        + [Column(f"config.{f}", f, kinds.get(f, "text")) for f in config]
        + ([BRANCH_COLUMN] if branches else [])
        + RESULT_COLUMNS
    )


def branch_of(run) -> str:
    """'#12 @20' for a branch of run 12 from step 20 ('' for a root run)."""
    if getattr(run, "branch_step", None) is None:
        return ""
    parent = f"#{run.parent_id} " if run.parent_id is not None else ""
    return f"{parent}@{run.branch_step}"


def shown_fields(configs: Sequence[Mapping[str, Any]], varying: Sequence[str]) -> list[str]:
    """The config columns: the core fields any run has, then every other field that varies."""
    present = {name for config in configs for name in config}
    core = [f for f in CORE_FIELDS if f in present]
    return core + sorted(f for f in varying if f not in CORE_FIELDS)


def rows(
    runs: Sequence, configs: Mapping[int, Mapping[str, Any]], summaries: Mapping[int, dict]
) -> list[dict[str, Any]]:
    """One row per run: its id, every config field (as `config.<name>`) and its results."""
    out = []
    for run in runs:
        accuracy = RunSummary.of(summaries.get(run.id)).accuracy
        row = {"run": run.id, "status": run.status, "branch_of": branch_of(run)}
        row.update({f"config.{k}": _shown(v) for k, v in (configs.get(run.id) or {}).items()})
        row.update({k: getattr(accuracy, k) for k in ("peak", "peak_step", "final", "cliff_onset")})
        # The verdict in words, as on every page (`analysis.cliffs.cliff_label`).
        row["cliff"] = accuracy.label
        row["cliff_status"] = accuracy.cliff_status
        # Whichever fall the verdict names, as the run page's "degradation @2".
        row["onset"] = (
            accuracy.cliff_onset if accuracy.cliff_onset is not None else accuracy.degradation_onset
        )
        out.append(row)
    return out


def sort_rows(table: Sequence[dict], column: str | None, descending: bool = False) -> list[dict]:
    """`table` ordered by `column`: numbers by value, then text by its words; an empty cell
    is always last, whichever the direction. Ties keep run order."""
    if not column:
        return list(table)

    def key(row: dict):
        value = row.get(column)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return (1, str(value).lower()) if value not in (None, "") else (2, "")
        return (0, value)

    filled = [r for r in table if r.get(column) not in (None, "")]
    blank = [r for r in table if r.get(column) in (None, "")]
    numbers = sorted((r for r in filled if key(r)[0] == 0), key=key, reverse=descending)
    words = sorted((r for r in filled if key(r)[0] == 1), key=key, reverse=descending)
    return numbers + words + blank
