"""The explorer's filters and sorts as conditions and orderings of a Run query, so that the
database evaluates them and returns one page of ids (`query.py` falls back to reading rows
only for what cannot be said here: times, `run_id`, `user_id`, a param compared as a number).

- the run's own columns (status, the cell axes, seed, step, experiment, owner, run name);
- a metric's last value (`webapp.metrics.digests.last_value`: one backward seek into the
  points' primary key a run) and, for a sort, its min or max;
- a verdict (`RunVerdict`, joined), after the runs whose stored verdict is stale are
  summarised again (`verdicts.refresh_stale`);
- a param or tag compared as a string: the one key read out of the run's JSON
  (a trained run's config, an MLflow run's params; `RunTags` and an MLflow run's tags).

Each keeps `webapp.tracking.search`'s meaning: a missing value matches nothing but IS NULL,
LIKE is whole-string with `%` and `_`.
"""

from __future__ import annotations

from django.db.models import F, Q, QuerySet
from django.db.models.expressions import OrderBy
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from webapp.explorer.fields import Column
from webapp.explorer.verdicts import FIELDS as VERDICTS
from webapp.explorer.verdicts import refresh_stale
from webapp.metrics.digests import folded_value, last_value
from webapp.tracking import search

COLUMNS = {
    "run_name": "name",
    "status": "status",
    "workflow": "workflow",
    "task": "task",
    "model": "model",
    "sharing": "sharing",
    "seed": "seed",
    "step": "step",
    "experiment": "experiment__name",
    "experiment_id": "experiment_id",
    "owner": "experiment__owner__username",
    "created": "id",  # runs are numbered as they are made: sorting only, never compared
}
_LOOKUPS = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def _text(kind: str, name: str):
    """A param's or tag's value as the run's JSON holds it."""
    # KeyTextTransform on a path, not KT: KT reads a relation's name as the JSON column.
    if kind == "params":
        return Coalesce(KeyTextTransform(name, "tracked__params"), KeyTextTransform(name, "config"))
    return Coalesce(
        KeyTextTransform(name, "explorer_tags__tags"), KeyTextTransform(name, "tracked__tags")
    )


def _compare(path: str, clause: search.Clause) -> Q:
    """`path <op> value`, where a missing value (NULL) matches nothing but IS NULL."""
    op, value = clause.op, clause.value
    present = Q(**{f"{path}__isnull": False})
    match op:
        case "IS NULL":
            return ~present
        case "IS NOT NULL":
            return present
        case "IN":
            return Q(**{f"{path}__in": list(value)})
        case "NOT IN":
            return present & ~Q(**{f"{path}__in": list(value)})
        case "!=":
            return present & ~Q(**{path: value})
        case "LIKE":
            return Q(**{f"{path}__regex": search.like_regex(value)})
        case "ILIKE":
            return Q(**{f"{path}__iregex": search.like_regex(value)})
    return Q(**{f"{path}__{_LOOKUPS[op]}": value})


def _numeric_string(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _condition(clause: search.Clause, n: int) -> tuple[dict, Q] | None:
    """({annotation name: expression}, condition) of one clause, or None where the database
    cannot say it exactly as `search` would."""
    kind, name, value = clause.kind, clause.name, clause.value
    if kind == "metrics":
        if isinstance(value, tuple) or clause.op.endswith("LIKE"):
            return None
        return {f"_f{n}": last_value(name)}, _compare(f"_f{n}", clause)
    if kind in ("params", "tags"):
        texts = value if isinstance(value, tuple) else (value,)
        if "__" in name or any(not isinstance(t, str) or _numeric_string(t) for t in texts):
            return None  # numbers read differently from each database's JSON
        return {f"_f{n}": _text(kind, name)}, _compare(f"_f{n}", clause)
    if name in VERDICTS:
        return {}, _compare(f"verdict__{name}", clause)
    if name in COLUMNS and name != "created":
        if isinstance(value, float):
            if name not in ("seed", "step", "experiment_id"):
                return None
            value = int(value) if value.is_integer() else value
        if isinstance(value, tuple) and name in ("seed", "step", "experiment_id"):
            return None
        fixed = search.Clause(kind, name, clause.op, value)
        return {}, _compare(COLUMNS[name], fixed)
    return None


def narrow(runs: QuerySet, clauses: list[search.Clause]) -> tuple[QuerySet, list[search.Clause]]:
    """The runs with every clause the database can evaluate applied, and the clauses left."""
    if any(c.kind == "attributes" and c.name in VERDICTS for c in clauses):
        refresh_stale(runs)
    rest = []
    # The cheap conditions first: a database checks them in the order given, so a metric's
    # seek is made only for the runs that the run's own columns and JSON let through.
    for n, clause in sorted(enumerate(clauses), key=lambda nc: _cost(nc[1])):
        found = _condition(clause, n)
        if found is None:
            rest.append(clause)
            continue
        annotations, condition = found
        # alias, not annotate: the value filters without being selected (or counted) again
        runs = runs.alias(**annotations).filter(condition)
    return runs, rest


def _cost(clause: search.Clause) -> int:
    if clause.kind == "metrics":
        return 3
    if clause.kind in ("params", "tags"):
        return 2 if clause.op.endswith("LIKE") else 1
    return 0


def ordering(runs: QuerySet, column: Column, descending: bool) -> tuple[QuerySet, list] | None:
    """The runs annotated for a sort on `column`, and the ordering; None where the database
    cannot sort on it (a time, `run_id`, `user_id`)."""
    if column.kind == "metrics":
        agg = column.aggregate or "last"
        expression = last_value(column.name) if agg == "last" else folded_value(column.name, agg)
        runs = runs.alias(_sort=expression)
    elif column.kind in ("params", "tags") and "__" not in column.name:
        runs = runs.alias(_sort=_text(column.kind, column.name))
    elif column.kind == "attributes" and column.name in VERDICTS:
        refresh_stale(runs)
        runs = runs.alias(_sort=F(f"verdict__{column.name}"))
    elif column.kind == "attributes" and column.name in COLUMNS:
        runs = runs.alias(_sort=F(COLUMNS[column.name]))
    else:
        return None
    first: OrderBy = (
        F("_sort").desc(nulls_last=True) if descending else F("_sort").asc(nulls_last=True)
    )
    return runs, [first, "-id" if descending else "id"]
