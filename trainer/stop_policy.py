"""When a run stops early by its own policy: `stop_after_cliff` (docs/design.md §3 extension).

A run with `stop_after_cliff` N > 0 ends, as succeeded, N evaluations after the live radar
(`analysis/radar.py`, the same code the web pages run) confirms a terminal-accuracy cliff on
its `eval/accuracy` so far: past a confirmed cliff, further steps mostly spend compute on a
policy that has already collapsed, and the best checkpoint is kept anyway. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.radar import radar
from vocabulary.names import ACCURACY_KEY, ACCURACY_SE_KEY


def cliff_stop_reason(evals: Sequence[Sequence[float]], after: int) -> str | None:
    """Why the run should stop now, or None. `evals`: (step, accuracy) or (step, accuracy,
    standard error) so far, in order; with the SE the radar's noise test uses it, as the
    pages do on the run's `eval/accuracy_se` (checkpoints saved before it hold pairs)."""
    if after <= 0 or not evals:
        return None
    steps = [e[0] for e in evals]
    series = {ACCURACY_KEY: (steps, [e[1] for e in evals])}
    if all(len(e) > 2 for e in evals):
        series[ACCURACY_SE_KEY] = (steps, [e[2] for e in evals])
    found = radar(series, running=True)["events"]
    # Terminal degradation (a fall below a base never beaten) spends compute the same way.
    confirmed = [e for e in found if e["kind"] in ("cliff", "degradation") and not e["provisional"]]
    if not confirmed:
        return None
    cliff = confirmed[0]
    since = sum(1 for s in steps if s > cliff["seen_at"])
    if since < after:
        return None
    return (
        f"Stopping early (stop_after_cliff={after}): the accuracy "
        f"{'cliff' if cliff['kind'] == 'cliff' else 'degradation'} at step {cliff['step']} "
        f"was confirmed at step {cliff['seen_at']}, {since} evaluation"
        f"{'s' if since != 1 else ''} ago."
    )
