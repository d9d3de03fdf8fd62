"""The explorer's fields: what a filter, a column and a sort may name.

The filter language is MLflow's, read by `webapp.tracking.search` (the REST API's parser),
given the explorer's attributes: MLflow's own (`run_name`, `status`, `run_id`, `start_time`,
`end_time`, `user_id`) and Troupe's (the verdicts `cliff_status`, `capture`,
`amplification`, `peak`, `final`, `gain`; the cell axes and `seed`; `owner`, `experiment`,
`experiment_id`, `created`, `step`). Params accept a number as well as a string
(`params.lr <= 1e-5`). A status may be given as Troupe's (`succeeded`) or MLflow's
(`FINISHED`).

A column is an entity: `attributes.<name>`, `params.<name>`, `tags.<name>`, or
`metrics.<key>` with an optional `@last` / `@min` / `@max` (the last value, MLflow's, by
default). A sort is a column and `ASC` or `DESC`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vocabulary.names import ACCURACY_KEY, CELL_AXES
from webapp.experiments.models import Run
from webapp.explorer.verdicts import FIELDS as VERDICTS
from webapp.explorer.verdicts import NUMBERS as VERDICT_NUMBERS
from webapp.metrics.digests import AGGREGATES
from webapp.tracking import search
from webapp.tracking.protocol import MlflowError

MLFLOW_ATTRIBUTES = ("run_name", "status", "run_id", "start_time", "end_time", "user_id")
TROUPE_ATTRIBUTES = (
    *VERDICTS,
    *CELL_AXES,
    "seed",
    "owner",
    "experiment",
    "experiment_id",
    "created",
    "step",
)
ATTRIBUTES = (*MLFLOW_ATTRIBUTES, *TROUPE_ATTRIBUTES)
NUMERIC = ("start_time", "end_time", "created", "seed", "experiment_id", "step", *VERDICT_NUMBERS)
TIMES = ("start_time", "end_time", "created")  # ms since the epoch; shown in the viewer's zone
LOOSE = ("params",)

# MLflow's run statuses → Troupe's, so `status = 'FINISHED'` reads as it does in MLflow.
MLFLOW_STATUS = {
    "FINISHED": Run.SUCCEEDED,
    "RUNNING": Run.RUNNING,
    "SCHEDULED": Run.QUEUED,
    "FAILED": Run.FAILED,
    "KILLED": Run.CANCELLED,
}

DEFAULT_COLUMNS = (
    "attributes.run_name",
    "attributes.experiment",
    "attributes.owner",
    "attributes.status",
    "attributes.workflow",
    "attributes.sharing",
    "attributes.seed",
    "attributes.peak",
    "attributes.final",
    "attributes.cliff_status",
    "attributes.created",
)
DEFAULT_SORT = ("attributes", "created", None, True)
MAX_COLUMNS = 40
ACCURACY = ACCURACY_KEY  # the metric the verdicts read, offered first in the chooser


class ExplorerError(ValueError):
    """A filter, column or sort the explorer cannot read; its message says where."""


@dataclass(frozen=True)
class Column:
    kind: str  # attributes, params, tags, metrics
    name: str
    aggregate: str | None = None  # metrics only: last, min, max

    @property
    def spec(self) -> str:
        tail = f"@{self.aggregate}" if self.aggregate and self.aggregate != "last" else ""
        return f"{self.kind}.{self.name}{tail}"

    @property
    def numeric(self) -> bool:
        return self.kind == "metrics" or (self.kind == "attributes" and self.name in NUMERIC)


def parse_filter(text: str) -> list[search.Clause]:
    try:
        clauses = search.parse_filter(text, ATTRIBUTES, NUMERIC, loose=LOOSE)
    except MlflowError as error:
        raise ExplorerError(error.message) from None
    return [_troupe_status(c) for c in clauses]


def _troupe_status(clause: search.Clause) -> search.Clause:
    if clause.kind != "attributes" or clause.name != "status":
        return clause
    value = clause.value
    if isinstance(value, tuple):
        value = tuple(MLFLOW_STATUS.get(v.upper(), v) for v in value)
    elif isinstance(value, str) and not clause.op.endswith("LIKE"):
        value = MLFLOW_STATUS.get(value.upper(), value)
    return search.Clause(clause.kind, clause.name, clause.op, value)


_AT = re.compile(r"^(?P<entity>.+?)(?:@(?P<agg>[A-Za-z]+))?$")


def parse_column(text: str) -> Column:
    found = _AT.match((text or "").strip())
    if not found:
        raise ExplorerError(f"Cannot read the column {text!r}: e.g. metrics.loss@max.")
    try:
        ((kind, name, _),) = search.parse_order([found["entity"]], ATTRIBUTES)
    except MlflowError as error:
        raise ExplorerError(f"Column {text!r}: {error.message}") from None
    agg = (found["agg"] or "").lower() or None
    if agg and (kind != "metrics" or agg not in AGGREGATES):
        raise ExplorerError(
            f"Column {text!r}: only a metric takes @{'/@'.join(AGGREGATES)}, not @{agg}."
        )
    return Column(kind, name, (agg or "last") if kind == "metrics" else None)


def parse_columns(texts: list[str]) -> list[Column]:
    if len(texts) > MAX_COLUMNS:
        raise ExplorerError(f"At most {MAX_COLUMNS} columns; {len(texts)} were asked for.")
    return list(dict.fromkeys(parse_column(t) for t in texts if t.strip()))


def parse_sort(text: str) -> tuple[Column, bool]:
    """(column, descending) of `<column> [ASC|DESC]`; the newest runs first when empty."""
    found = re.fullmatch(r"\s*(?P<col>.*?)(?:\s+(?P<dir>ASC|DESC))?\s*", text or "", re.I)
    if not found or not found["col"]:
        kind, name, agg, descending = DEFAULT_SORT
        return Column(kind, name, agg), descending
    return parse_column(found["col"]), (found["dir"] or "ASC").upper() == "DESC"
