"""The episodes of a run through the JSON API: one page at a time, or all of them as JSONL.

`GET /api/v1/runs/<id>/episodes?step=&kind=&correct=&problem=&q=&page=&per_page=` →
`{"count", "page", "pages", "per_page", "episodes": [{"id", "kind", "step", "index",
"problem_id", "sample", "answer", "reward", "correct", "malformed", "turns": […]}, …]}` in
(step, kind, index) order; `GET /api/v1/runs/<id>/episodes.jsonl` with the same filters
streams every matching episode, one JSON object a line. A parameter that cannot be read is a
400 naming it. `q` is matched (case-insensitively) inside the compressed records, so it scans
at most `MAX_SCAN` episodes: narrow with `step`, `kind` or `problem` first.

`order=grad_share:<role>` (the gradient drill-down, trainer/grad_drill.py) lists the episodes
by their share of that role's gradient at their step, largest first; episodes without one
(evaluations, runs without `episodes_grad_share`, another workflow's roles) come last, in
(step, kind, index) order. The share is inside the records, so it reads them: at most
`MAX_SCAN`, as `q`. With `step=N&kind=train` it answers "which episodes carried this role's
gradient at step N".
"""

from __future__ import annotations

import json
import math

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse

from trainer.config import INT_MAX
from webapp.episodes.models import Episode
from webapp.episodes.store import Filters, records, select
from webapp.ids import whole_number
from webapp.jsonapi.http import ApiError, api_view
from webapp.runs.access import get_run_for_user

PER_PAGE = 20
MAX_PER_PAGE = 100
MAX_SCAN = 5000
MAX_QUERY = 200  # characters of `q`
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _whole(request: HttpRequest, name: str, low: int, high: int) -> int | None:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return None
    number = whole_number(raw)
    if number is None or not low <= number <= high:
        raise ApiError(400, "Invalid request.", {name: f"a whole number from {low} to {high}"})
    return number


def _filters(request: HttpRequest) -> Filters:
    kind = request.GET.get("kind") or None
    if kind is not None and kind not in Episode.KINDS:
        raise ApiError(400, "Invalid request.", {"kind": "one of train, eval"})
    correct = request.GET.get("correct") or None
    if correct is not None:
        if correct.lower() not in _TRUE + _FALSE:
            raise ApiError(400, "Invalid request.", {"correct": "true or false"})
        correct = correct.lower() in _TRUE
    problem = request.GET.get("problem") or None
    if problem is not None and len(problem) > 200:
        raise ApiError(400, "Invalid request.", {"problem": "a problem id (at most 200 chars)"})
    q = request.GET.get("q") or None
    if q is not None and len(q) > MAX_QUERY:
        raise ApiError(400, "Invalid request.", {"q": f"at most {MAX_QUERY} characters"})
    step = _whole(request, "step", 0, INT_MAX)
    return Filters(step=step, kind=kind, correct=correct, problem=problem, q=q)


def _order(request: HttpRequest) -> str | None:
    """The role of `order=grad_share:<role>`, or None when there is no `order`."""
    raw = request.GET.get("order") or None
    if raw is None:
        return None
    prefix, _, role = raw.partition(":")
    if prefix != "grad_share" or not role or len(role) > 100:
        raise ApiError(400, "Invalid request.", {"order": "grad_share:<role>"})
    return role


def _matching(run_id: int, filters: Filters, reads_records: bool = False):
    rows = select(run_id, filters)
    if (filters.q is not None or reads_records) and rows.count() > MAX_SCAN:
        name = "q" if filters.q is not None else "order"
        raise ApiError(
            400,
            "Invalid request.",
            {name: f"reads at most {MAX_SCAN} episodes: narrow with step, kind or problem"},
        )
    return rows


def _by_share(found: list[dict], role: str) -> list[dict]:
    """Largest share of `role`'s gradient first; those without one after, in stored order."""

    def share(record: dict) -> float | None:
        value = (record.get("grad_share") or {}).get(role)
        return value if isinstance(value, (int, float)) and math.isfinite(value) else None

    with_share = [r for r in found if share(r) is not None]
    without = [r for r in found if share(r) is None]
    return sorted(with_share, key=lambda r: -share(r)) + without


@api_view("GET")
def episodes(request: HttpRequest, run_id: int) -> JsonResponse:
    found = get_run_for_user(request.user, run_id)
    filters = _filters(request)
    order = _order(request)
    page = _whole(request, "page", 1, INT_MAX) or 1
    per_page = _whole(request, "per_page", 1, MAX_PER_PAGE) or PER_PAGE
    rows = _matching(found.id, filters, reads_records=order is not None)
    first = (page - 1) * per_page
    if filters.q is None and order is None:
        count = rows.count()
        shown = list(records(rows[first : first + per_page]))
    else:  # the search and the order read the records: count while reading, keep the page's
        found_all = list(records(rows, filters.q))
        if order is not None:
            found_all = _by_share(found_all, order)
        count, shown = len(found_all), found_all[first : first + per_page]
    return JsonResponse(
        {
            "count": count,
            "page": page,
            "pages": math.ceil(count / per_page),
            "per_page": per_page,
            "episodes": shown,
        }
    )


@api_view("GET")
def episodes_jsonl(request: HttpRequest, run_id: int) -> StreamingHttpResponse:
    found = get_run_for_user(request.user, run_id)
    filters = _filters(request)
    order = _order(request)
    rows = _matching(found.id, filters, reads_records=order is not None)  # before any byte
    found_all = records(rows, filters.q)
    if order is not None:
        found_all = iter(_by_share(list(found_all), order))
    lines = (json.dumps(record) + "\n" for record in found_all)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="run-{found.id}-episodes.jsonl"'
    return response
