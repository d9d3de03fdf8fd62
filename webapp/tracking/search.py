"""MLflow's search filters and orderings, the subset that scripts use, applied in Python.

A filter is comparisons joined by AND: `metrics.loss < 0.5 AND params.lr = '2e-5' AND
tags.workflow = 'voting' AND attributes.status = 'FINISHED'`. Names may be quoted with
backticks or double quotes; operators are = != < <= > >= LIKE ILIKE (`%` and `_` wildcards),
IN and NOT IN ('a', 'b') and IS NULL / IS NOT NULL (a missing tag, param or metric);
values are 'strings' or numbers. Entities: `metrics.`, `params.`, `tags.`, and attributes
(`attributes.` or bare: `run_name`, `status`, `run_id`, `start_time`, `end_time`, `user_id`;
for experiments `name`, `creation_time`, `last_update_time`). Anything else is an
INVALID_PARAMETER_VALUE naming the part that could not be read. An ordering is
`<entity> [ASC|DESC]`; missing values sort last.

NaN and ±inf, as MLflow's SQL store treats them (`sqlalchemy_store._get_sqlalchemy_filter_clauses`
and `_get_orderby_clauses`): a getter hands a NaN metric over as `math.nan`, never as None
(the metric exists: IS NOT NULL holds, IS NULL does not). A comparison with NaN is false for
every operator but `!=`, which holds (`metrics.x != 1` finds the NaN runs); ±inf compare
as the numbers they are (`inf > 1e308`, `-inf < 0`, `inf = inf`). Ordered, a NaN value comes
after every number and before the missing values, whichever the direction.

Callers other than MLflow's endpoints extend the language through the same parser's
arguments rather than a parser of their own: `attributes` and `numeric` name their extra
fields (the runs explorer's verdicts, cell axes, owner, experiment), and `loose` names the
entity kinds whose values may be a number or a string (`params.lr <= 1e-5` beside
`params.lr = '1e-5'`): an unquoted number there is a float `Clause.value`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from webapp.tracking.protocol import INVALID, MlflowError

_VALUE = r"""'[^']*'|"[^"]*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"""
_CLAUSE = re.compile(
    r"""\s*(?P<ident>(?:(?P<kind>[A-Za-z]+)\.)?(?P<name>`[^`]+`|"[^"]+"|[\w.\-/:]+))\s*"""
    r"""(?:(?P<null>IS\s+NOT\s+NULL\b|IS\s+NULL\b)"""
    r"""|(?P<inop>NOT\s+IN\b|IN\b)\s*\((?P<list>\s*(?:'[^']*'|"[^"]*")"""
    r"""(?:\s*,\s*(?:'[^']*'|"[^"]*"))*\s*,?\s*)\)"""
    rf"""|(?P<op>!=|<=|>=|=|<|>|ILIKE\b|LIKE\b)\s*(?P<value>{_VALUE}))\s*""",
    re.IGNORECASE,
)
_LISTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_AND = re.compile(r"AND\b", re.IGNORECASE)
_KINDS = {
    "metric": "metrics",
    "metrics": "metrics",
    "param": "params",
    "params": "params",
    "parameter": "params",
    "parameters": "params",
    "tag": "tags",
    "tags": "tags",
    "attribute": "attributes",
    "attributes": "attributes",
    "attr": "attributes",
    "run": "attributes",
}


@dataclass(frozen=True)
class Clause:
    kind: str  # metrics, params, tags, attributes
    name: str
    op: str
    value: str | float | tuple[str, ...]  # a tuple for IN and NOT IN


Getter = Callable[[str, str], Any]  # (kind, name) → the record's value (NaN: math.nan), or None


def _unquote(text: str) -> str:
    return text[1:-1] if text[:1] in "`\"'" and text[-1:] == text[:1] else text


def _entity(kind: str | None, name: str, attributes: Sequence[str]) -> tuple[str, str]:
    kind = _KINDS.get((kind or "attributes").lower())
    name = _unquote(name)
    if kind is None or (kind == "attributes" and name not in attributes):
        raise MlflowError(
            INVALID,
            f"Cannot search on '{name}': use metrics.<key>, params.<key>, tags.<key> "
            f"or one of the attributes {', '.join(attributes)}.",
        )
    return kind, name


def parse_filter(
    text: str, attributes: Sequence[str], numeric: Sequence[str], loose: Sequence[str] = ()
) -> list[Clause]:
    clauses: list[Clause] = []
    pos, text = 0, text or ""
    while text[pos:].strip():
        found = _CLAUSE.match(text, pos)
        if not found:
            raise MlflowError(
                INVALID,
                f"Cannot read the filter at {text[pos : pos + 40]!r}: expected "
                "<entity> <op> <value>, e.g. metrics.loss < 0.5 AND tags.task = 'math'.",
            )
        kind, name = _entity(found["kind"], found["name"], attributes)
        if found["null"]:
            clauses.append(Clause(kind, name, " ".join(found["null"].upper().split()), ""))
        elif found["inop"]:
            values = tuple(single or double for single, double in _LISTED.findall(found["list"]))
            clauses.append(Clause(kind, name, " ".join(found["inop"].upper().split()), values))
        else:
            clauses.append(_comparison(found, kind, name, numeric, loose))
        pos = found.end()
        if text[pos:].strip():
            joiner = _AND.match(text, pos)
            if not joiner:
                raise MlflowError(
                    INVALID,
                    f"Filters combine comparisons with AND only, at {text[pos : pos + 20]!r}.",
                )
            pos = joiner.end()
            if not text[pos:].strip():
                raise MlflowError(INVALID, "The filter ends with AND: add a comparison after it.")
    return clauses


def _comparison(
    found: re.Match, kind: str, name: str, numeric: Sequence[str], loose: Sequence[str] = ()
) -> Clause:
    raw, op = found["value"], found["op"].upper()
    quoted = raw[0] in "'\""
    is_number = kind == "metrics" or (kind == "attributes" and name in numeric)
    if kind in loose and not op.endswith("LIKE"):
        is_number = not quoted
    if is_number == quoted or (op.endswith("LIKE") and is_number):
        want = "a number" if is_number else "a quoted string"
        raise MlflowError(INVALID, f"In '{found['ident']} {op} {raw}': expected {want}.")
    return Clause(kind, name, op, float(raw) if is_number else _unquote(raw))


def like_regex(pattern: str) -> str:
    """A LIKE pattern (`%` any run of characters, `_` any one) as a regular expression for
    Python's `re` and PostgreSQL alike, that takes time in proportion to the value's length
    times the pattern's. The plain translation (`%` as `.*`) backtracks exponentially: a
    name of 50 a's against '%a%a%a%a%a%a%b' took seconds, 200 would take hours. Each part
    between two `%` matches at its first place (a tempered `(?:(?!part).)*`, which cannot
    skip one); the first possible place is the only one worth trying, so nothing backtracks
    further than one part."""
    first, *rest = [
        "".join("." if c == "_" else re.escape(c) for c in s) for s in pattern.split("%")
    ]
    if rest:
        *middle, last = rest
        first += "".join(f"(?:(?!{m}).)*{m}" for m in middle if m) + f".*{last}"
    # (?s): `.` takes a newline too, as LIKE's `_` and `%` do; \Z: the very end (`$` would
    # also stop before a last newline). Both read alike in Python and PostgreSQL.
    return rf"(?s)^{first}\Z"


def _like(pattern: str, value: str, ignore_case: bool) -> bool:
    flags = re.IGNORECASE if ignore_case else 0
    return re.fullmatch(like_regex(pattern), value, flags) is not None


def _holds(clause: Clause, value: Any) -> bool:
    if clause.op in ("IS NULL", "IS NOT NULL"):
        return (value is None) == (clause.op == "IS NULL")
    if value is None:
        return False
    if clause.op in ("IN", "NOT IN"):
        return (str(value) in clause.value) == (clause.op == "IN")
    target = clause.value
    if isinstance(target, float):
        value = float(value)  # NaN compares false but for "!=", as IEEE 754 (and MLflow) say
    else:
        value = str(value)
    match clause.op:
        case "=":
            return value == target
        case "!=":
            return value != target
        case "<":
            return value < target
        case "<=":
            return value <= target
        case ">":
            return value > target
        case ">=":
            return value >= target
        case "LIKE" | "ILIKE":
            return _like(str(target), value, clause.op == "ILIKE")
    return False


def matches(clauses: Sequence[Clause], get: Getter) -> bool:
    return all(_holds(c, get(c.kind, c.name)) for c in clauses)


def parse_order(items: Sequence[str], attributes: Sequence[str]) -> list[tuple[str, str, bool]]:
    """[(kind, name, descending)] of MLflow order_by strings."""
    out = []
    for item in items or []:
        found = re.fullmatch(
            r"\s*(?:(?P<kind>[A-Za-z]+)\.)?(?P<name>`[^`]+`|\"[^\"]+\"|[\w.\-/:]+)"
            r"(?:\s+(?P<dir>ASC|DESC))?\s*",
            item or "",
            re.IGNORECASE,
        )
        if not found:
            raise MlflowError(INVALID, f"Cannot read the ordering {item!r}: '<entity> [ASC|DESC]'.")
        kind, name = _entity(found["kind"], found["name"], attributes)
        out.append((kind, name, (found["dir"] or "ASC").upper() == "DESC"))
    return out


def order(records: list, orders: Sequence[tuple[str, str, bool]], get: Callable) -> list:
    """Sorted by each ordering in turn (the last given is applied first, so the first rules);
    a record whose value is NaN goes after the others, one missing a value last, whichever
    the direction."""
    for kind, name, descending in reversed(orders):
        ranked: tuple[list, list, list] = ([], [], [])  # values, NaN, missing
        for record in records:
            value = get(record, kind, name)
            ranked[2 if value is None else 1 if _is_nan(value) else 0].append(record)
        ranked[0].sort(key=lambda r: get(r, kind, name), reverse=descending)
        records = [*ranked[0], *ranked[1], *ranked[2]]
    return records


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
