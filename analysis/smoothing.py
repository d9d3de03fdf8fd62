"""Display smoothing: what the panel draws over a noisy curve. No verdict ever sees it.

Troupe has two smoothings for the eye and one for a verdict, each named for what it is:

- `smooth_series` (the seed-bands page): one run's series, cleaned, then `"ema"` —
  y₀ = x₀, yᵢ = α·xᵢ + (1 − α)·yᵢ₋₁ (no bias correction; `alpha` in (0, 1]) — or
  `"rolling"`: the trailing mean of the last `window` logged points (fewer at the start);
- `centred_mean` (the compare page): a centred rolling mean over `window` points of values
  already on one step axis; gaps stay gaps and the window shrinks at the ends;
- the cliff verdict's own centred rolling *median* is `median_window` of
  `analysis.cliffs.summarize_accuracy`, part of the rule (docs/analysis.md), not display.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.series import clean_series


def smooth_series(
    steps: Sequence, values: Sequence, *, method: str | None = None, alpha: float = 0.1, window=5
) -> tuple[np.ndarray, np.ndarray]:
    """One run's series, cleaned and smoothed (`method` None, "ema" or "rolling")."""
    s, v = clean_series(steps, values)
    if method is None:
        return s, v
    if method == "ema":
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must lie in (0, 1], not {alpha}")
        return s, pd.Series(v).ewm(alpha=alpha, adjust=False).mean().to_numpy()
    if method == "rolling":
        if int(window) != window or window < 1:
            raise ValueError(f"window must be a positive whole number, not {window}")
        return s, pd.Series(v).rolling(int(window), min_periods=1).mean().to_numpy()
    raise ValueError(f"smoothing must be None, 'ema' or 'rolling', not {method!r}")


def centred_mean(values: Sequence, window: int) -> list:
    """Centred rolling mean over `window` points for display; gaps (None) stay gaps and the
    window shrinks at the ends."""
    if window <= 1 or not len(values):
        return list(values)
    v = np.array([np.nan if x is None else x for x in values], dtype=float)
    finite = np.isfinite(v)
    kernel = np.ones(window)
    sums = np.convolve(np.where(finite, v, 0.0), kernel, mode="same")
    counts = np.convolve(finite.astype(float), kernel, mode="same")
    out = np.where(finite & (counts > 0), sums / np.maximum(counts, 1), np.nan)
    return [float(x) if np.isfinite(x) else None for x in out]
