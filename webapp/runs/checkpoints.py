"""A run's best checkpoint as the trainer's latest points record it: the run page's Radar
panel shows it and the MLflow endpoint's logged models list it, so it lives here, below both,
rather than in either's template tags."""

from __future__ import annotations

from vocabulary.names import BEST_ACCURACY_KEY, BEST_STEP_KEY
from webapp.metrics import latest_values


def best_checkpoint(run_id: int) -> dict | None:
    """{"step", "accuracy"} of the run's best checkpoint, from the trainer's latest points."""
    latest = latest_values(run_id, [BEST_STEP_KEY, BEST_ACCURACY_KEY])
    if latest.get(BEST_STEP_KEY) is None:
        return None
    return {"step": int(latest[BEST_STEP_KEY]), "accuracy": latest.get(BEST_ACCURACY_KEY)}
