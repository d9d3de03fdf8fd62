"""The episodes of a run through the JSON API: one page at a time, or all of them as JSONL.

`GET /api/v1/runs/<id>/episodes?step=&kind=&correct=&problem=&q=&page=&per_page=` →
`{"count", "page", "pages", "per_page", "episodes": [{"id", "kind", "step", "index",
"problem_id", "sample", "answer", "reward", "correct", "malformed", "turns": […]}, …]}` in
(step, kind, index) order; `GET /api/v1/runs/<id>/episodes.jsonl` with the same filters
streams every matching episode, one JSON object a line. A parameter that cannot be read is a
400 naming it. `q` is matched (case-insensitively) inside the compressed records, so it scans
at most `MAX_SCAN` episodes: narrow with `step`, `kind` or `problem` first.
"""

from __future__ import annotations

import json
import math

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse

from trainer.config import INT_MAX
from webapp.api.http import ApiError, api_view
from webapp.episodes.models import Episode
from webapp.episodes.store import Filters, records, select
from webapp.experiments.access import get_run_for_user

PER_PAGE = 20
MAX_PER_PAGE = 100
MAX_SCAN = 5000
MAX_QUERY = 200  # characters of `q`
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _whole(request: HttpRequest, name: str, low: int, high: int) -> int | None:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return None
    raw = raw.strip()
    if not raw.isdigit() or len(raw) > 12 or not low <= int(raw) <= high:
        raise ApiError(400, "Invalid request.", {name: f"a whole number from {low} to {high}"})
    return int(raw)


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


def _matching(run_id: int, filters: Filters):
    rows = select(run_id, filters)
    if filters.q is not None and rows.count() > MAX_SCAN:
        raise ApiError(
            400,
            "Invalid request.",
            {"q": f"searches at most {MAX_SCAN} episodes: narrow with step, kind or problem"},
        )
    return rows


@api_view("GET")
def episodes(request: HttpRequest, run_id: int) -> JsonResponse:
    found = get_run_for_user(request.user, run_id)
    filters = _filters(request)
    page = _whole(request, "page", 1, INT_MAX) or 1
    per_page = _whole(request, "per_page", 1, MAX_PER_PAGE) or PER_PAGE
    rows = _matching(found.id, filters)
    first = (page - 1) * per_page
    if filters.q is None:
        count = rows.count()
        shown = list(records(rows[first : first + per_page]))
    else:  # the search reads the records: count while reading, keep the page's
        found_all = list(records(rows, filters.q))
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
    rows = _matching(found.id, filters)  # checked before the first byte goes out
    lines = (json.dumps(record) + "\n" for record in records(rows, filters.q))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="run-{found.id}-episodes.jsonl"'
    return response
