"""MLflow's `metrics/get-history-bulk-interval`: one metric of up to 100 runs, each run's points
sampled down to `max_results` (the MLflow UI's charts ask for it, as GET with `run_ids`
repeated in the query string). Answered as MLflow 3.17's server and SQL store answer it:
`start_step` and `end_step` together or neither, the points of a run ordered by step and
timestamp and split into `max_results` even buckets (SQL's NTILE), the first of each bucket
kept, and the run's last point always (in place of the last sample when there are already
`max_results`). Every point counts, not only a step's latest (`webapp.metrics.earlier`).
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from webapp.metrics import history_json
from webapp.metrics.earlier import every_point_json
from webapp.tracking import store
from webapp.tracking.protocol import INVALID, MlflowError, integer, mlflow_view, text

MAX_RUNS = 100  # MLflow's MAX_RUNS_GET_METRIC_HISTORY_BULK
MAX_RESULTS_PER_RUN = 2500  # MLflow's MAX_RESULTS_PER_RUN, also the default
STEP_MIN = -(2**63)


def sampled(points: list[dict], max_results: int) -> list[dict]:
    """The first point of each of `max_results` NTILE buckets, plus the last point."""
    total = len(points)
    if total <= max_results:
        return list(points)
    size, larger = divmod(total, max_results)  # the first `larger` buckets hold one more
    starts, at = [], 0
    for bucket in range(max_results):
        starts.append(at)
        at += size + (1 if bucket < larger else 0)
    kept = [points[i] for i in starts]
    if starts[-1] != total - 1:
        kept[-1] = points[-1]  # already max_results: the last sample gives way to the end
    return kept


def _run_ids(data: dict) -> list[str]:
    raw = data.get("run_ids")
    if raw is None or raw == "" or raw == []:
        raise MlflowError(INVALID, "Missing value for required parameter 'run_ids'.")
    ids = [raw] if isinstance(raw, str) else raw
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise MlflowError(INVALID, f"Parameter 'run_ids' must be a list of strings, not {raw!r}.")
    if len(ids) > MAX_RUNS:
        raise MlflowError(
            INVALID,
            f"GetMetricHistoryBulkInterval request must specify at most "
            f"{MAX_RUNS} run_ids. Received {len(ids)} run_ids.",
        )
    return ids


@mlflow_view("GET")
def bulk_interval(request: HttpRequest, user, data: dict) -> JsonResponse:
    run_ids = _run_ids(data)
    key = text(data, "metric_key", required=True, limit=store.METRIC_KEY_LIMIT)
    limit = integer(
        data, "max_results", default=MAX_RESULTS_PER_RUN, low=1, high=MAX_RESULTS_PER_RUN
    )
    start = integer(data, "start_step", low=STEP_MIN)
    end = integer(data, "end_step", low=STEP_MIN)
    if (start is None) != (end is None):
        raise MlflowError(
            INVALID, "If either start step or end step are specified, both must be specified."
        )
    if start is not None and start > end:
        raise MlflowError(
            INVALID,
            "end_step must be greater than start_step. "
            f"Found start_step={start} and end_step={end}.",
        )
    runs = [store.find_run(user, raw) for raw in run_ids]  # each must exist, as in MLflow
    metrics = []
    for raw, run in zip(run_ids, runs, strict=True):
        if store.is_alias(run, key):  # Troupe's copy, not a key the client logged
            continue
        points = every_point_json(run.id, key, history_json(run.id, key, STEP_MIN, None)[0])
        if start is not None:
            points = [p for p in points if start <= p["step"] <= end]
        metrics += [{**p, "run_id": raw} for p in sampled(points, limit)]
    return JsonResponse({"metrics": metrics} if metrics else {})
