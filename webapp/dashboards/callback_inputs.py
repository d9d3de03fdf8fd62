"""The panel's callback inputs, checked where they enter: a wrongly typed value is a 400.

Dash hands a callback whatever JSON the browser posted to `/_dash-update-component`, and a
callback written for a list of run ids, a metric key or a click on a point fails with a 500
on a dict, a 10**30, a nested list or a NUL (anyone signed in can post them). `install(app)`
checks each request before Dash dispatches it:

- the callback must be one the app has (a clientside-only output is not);
- every input and state entry is `{"id", "property", "value"}` (a list of them for a
  pattern-matching ALL), its value of the type its property takes (`BY_PROPERTY`), narrowed
  by what the component is (`BY_ID`: a `*-runs` value is run ids, a `*-key` a metric key,
  a `*-experiment` one id, the bands' sort state its two fields).

A value of the right type may still name nothing (a run that does not exist): the callbacks
handle that themselves, as they always did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from flask import jsonify, request

MAX_TEXT = 4096  # characters of a URL part or a text value
MAX_ITEMS = 1000  # entries of a list value (the panel shows at most hundreds of runs)
MAX_ID = 2**63 - 1  # the largest id the database holds
MAX_NUMBER = 2**53  # beyond this a JSON number is no longer exact


def _text(value: Any, limit: int = MAX_TEXT) -> bool:
    return value is None or (isinstance(value, str) and len(value) <= limit and "\0" not in value)


def _path(value: Any) -> bool:
    return value is None or (_text(value) and value.startswith("/"))


def _count(value: Any) -> bool:
    return value is None or (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31
    )


def _scalar(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        return math.isfinite(value) and abs(value) <= MAX_NUMBER
    return _text(value, 1000)


def _value(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(_scalar(v) and v is not None for v in value)
    return _scalar(value)


def _one_id(value: Any) -> bool:
    if isinstance(value, str):
        return value.isdecimal() and 0 < len(value) <= 19 and 0 < int(value) <= MAX_ID
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID


def _ids(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(_one_id(v) for v in value)
    return value is None or value == "" or _one_id(value)


def _click(value: Any) -> bool:
    if value is None:
        return True
    points = value.get("points", []) if isinstance(value, dict) else None
    return isinstance(points, list) and all(isinstance(p, dict) for p in points)


def _store(value: Any) -> bool:
    return value is None or isinstance(value, dict | list)


def _sort(value: Any) -> bool:
    if value is None:
        return True
    return (
        isinstance(value, dict)
        and set(value) <= {"col", "desc"}
        and _text(value.get("col"), 200)
        and isinstance(value.get("desc", False), bool)
    )


BY_PROPERTY: dict[str, Callable[[Any], bool]] = {
    "pathname": _path,
    "search": _text,
    "href": _text,
    "hash": _text,
    "n_clicks": _count,
    "n_intervals": _count,
    "clickData": _click,
    "data": _store,
    "value": _value,
}
# (how the component's id ends, its property) → the narrower check
BY_ID: dict[tuple[str, str], Callable[[Any], bool]] = {
    ("-runs", "value"): _ids,
    ("-experiment", "value"): lambda v: v is None or v == "" or _one_id(v),
    ("-key", "value"): lambda v: _text(v, 500),
    ("-sort-state", "data"): _sort,
}


def _name(ident: Any) -> str:
    return str(ident.get("type", "")) if isinstance(ident, dict) else str(ident)


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("property"), str):
        return "each input is {id, property, value}"
    name, prop = _name(entry.get("id")), entry["property"]
    check = next(
        (c for (end, p), c in BY_ID.items() if p == prop and name.endswith(end)),
        BY_PROPERTY.get(prop),
    )
    if check is not None and not check(entry.get("value")):
        return f"{name[:100]}.{prop[:50]}: not a value this input takes"
    return None


def problem(body: Any, callbacks: dict) -> str | None:
    """What is wrong with a callback request's body; None when it may be dispatched."""
    output = body.get("output") if isinstance(body, dict) else None
    if not isinstance(output, str) or "callback" not in callbacks.get(output, {}):
        return "no such callback"  # clientside callbacks have no server side either
    for kind in ("inputs", "state"):
        entries = body.get(kind, [])
        if not isinstance(entries, list):
            return f"{kind} is a list"
        for entry in entries:
            for item in entry if isinstance(entry, list) else [entry]:
                if (found := _entry_problem(item)) is not None:
                    return found
    return None


def install(app) -> None:
    """Check every callback request of `app` (a Dash app) before Dash dispatches it."""

    def check():
        if request.method != "POST" or not request.path.endswith("/_dash-update-component"):
            return None
        found = problem(request.get_json(silent=True), app.callback_map)
        if found is None:
            return None
        return jsonify({"error": f"Bad callback request: {found}."}), 400

    app.server.before_request(check)
