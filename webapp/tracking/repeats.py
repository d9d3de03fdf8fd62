"""Which of the points an MLflow client logged at one (key, step) stands, and which are kept
as earlier points, as MLflow keeps every one.

MLflow keeps every point: ten `log_metric("loss", v)` calls without a step are ten points at
step 0, and only an exact repeat (same key, step, timestamp and value: a retried batch) is
dropped. Troupe's metric table holds one value a step, which its pages and verdicts read, so
at each (key, step) the point with the latest timestamp stands there (of equal ones, the
last logged; a stored point counts as logged before the batch), and the others become
`EarlierPoint` rows that metrics/get-history merges back in (`webapp/metrics/earlier.py`).

Only a batch that holds a (key, step) twice, or a step the run has a time for already, can
meet another point at its place: every other batch (a training loop's new steps) passes
through without a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webapp.metrics.earlier import (
    Record,
    as_record,
    earlier_records,
    keep_earlier,
    stored_records,
)

if TYPE_CHECKING:
    from webapp.tracking.store import Point


def standing_points(run_id: int, points: list[Point], timed_steps: set[int]) -> list[Point]:
    """The points to write to the metric table, one a (key, step) at most; the others of
    the batch, and the stored points they replace, are kept as earlier points. A point that
    repeats one kept already (standing or earlier) is dropped."""
    groups: dict[tuple[str, int], list[Point]] = {}
    for point in points:
        groups.setdefault((point.key, point.step), []).append(point)
    met = [pair for pair in groups if pair[1] in timed_steps]
    if len(groups) == len(points) and not met:
        return points  # new steps, each point once: nothing to compare
    stored = stored_records(run_id, met)
    known = earlier_records(run_id, met)
    standing: list[Point] = []
    earlier: list[tuple[str, int, Record]] = []
    for pair, group in groups.items():
        old = stored.get(pair)
        new: dict[Record, Point] = {}
        for point in group:  # a record twice in one batch keeps its last place
            record = as_record(point.timestamp, point.value)
            if record != old and (*pair, record) not in known:
                new.pop(record, None)
                new[record] = point
        if not new:
            continue  # all exact repeats: nothing changes here
        # The latest timestamp stands; of equal ones the last logged (dicts keep order).
        records = ([old] if old is not None else []) + list(new)
        winner = max(enumerate(records), key=lambda item: (item[1][0], item[0]))[1]
        earlier += [(*pair, record) for record in records if record != winner]
        if winner in new:
            standing.append(new[winner])
    if earlier:
        keep_earlier(run_id, earlier)
    return standing
