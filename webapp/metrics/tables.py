"""The metric store's tables, and the SQL fragments both dialects share.

Points (`MetricPoint`, unique on (run, key, step)) belong to `webapp.experiments`; what
MLflow's protocol adds to them — each step's time (`StepTime`), a point's own time where it
differs (`PointTime`), the sign of a gap logged as ±inf (`PointSign`) — to
`webapp.tracking`, as are the points an MLflow client logged at a step where a later one now
stands (`EarlierPoint`: MLflow keeps every point). The models stay in their apps; only the
store writes SQL on them.
"""

from __future__ import annotations

from webapp.experiments.models import MetricPoint, Run
from webapp.metrics.models import EarlierPoint, PointSign, PointTime, StepTime

POINTS = MetricPoint._meta.db_table
RUNS = Run._meta.db_table
TIMES = StepTime._meta.db_table
OWN_TIMES = PointTime._meta.db_table
SIGNS = PointSign._meta.db_table
EARLIER = EarlierPoint._meta.db_table

# A point's time: its own where it has one, else its step's (0 when neither: points logged
# another way than MLflow's).
TIME_JOIN = f"""
    LEFT JOIN {TIMES} t ON t.run_id = p.run_id AND t.step = p.step
    LEFT JOIN {OWN_TIMES} o ON o.run_id = p.run_id AND o.key = p.key AND o.step = p.step
"""
# A gap's sign: ±inf where the point was logged as one (`PointSign`), else NaN.
SIGN_JOIN = f"""
    LEFT JOIN {SIGNS} g ON p.value IS NULL AND g.run_id = p.run_id AND g.key = p.key
        AND g.step = p.step
"""
INFINITY = {1: "Infinity", -1: "-Infinity"}  # protobuf's JSON spellings


def json_value(value: float | None, sign: int | None = None) -> float | str:
    """A stored value as MLflow's JSON spells it: a gap is "NaN", or ±"Infinity" by its sign."""
    if value is None:
        return INFINITY.get(sign, "NaN")  # type: ignore[arg-type]
    return value


def key_filter(keys: list[str] | None, column: str = "key") -> tuple[str, list]:
    """` AND key IN (…)` and its parameters; nothing for every key (None)."""
    if keys is None:
        return "", []
    return f" AND {column} IN ({', '.join(['%s'] * len(keys))})", list(keys)


def placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)
