"""Base, peak, final, gains and the terminal-cliff verdict of one `eval/accuracy` series
(docs/design.md §6; the rules and why: docs/analysis.md).

- `base` = a(s0) (the base model); `peak` = max a; `peak_step` = first step attaining it;
  `final` = mean of the last `final_window` (3) evaluations; `gain` = peak − base;
  `final_gain` = final − base.
- θ = max(`drop_frac` 0.5 × (peak − base), the drop evaluation noise can explain — z × SE of
  peak − final with z = Φ⁻¹(1 − `alpha`/n) over the run's n evaluations, the SE from paired
  per-problem accuracies, else `eval/accuracy_se`, else the curve's own second differences —
  and `min_drop` (0 by default)); `threshold` = peak − θ. So a collapse to zero from any
  positive peak is a cliff, and a wobble within noise is not. A fall below a base that no
  later evaluation beat is "degradation", not a cliff.
- Terminal cliff: final < threshold, and the series smoothed by a centred rolling median of
  `median_window` (3) points stays below threshold from some step after `peak_step` to the
  last evaluation. `cliff_onset` is the first such step: the start of the final stretch of
  the smoothed series below threshold (never at or before `peak_step`). At the two ends the
  window shrinks, so the first and last smoothed values are the median of two points (their
  mean). (`median_window` is the verdict's own smoothing; the panel's display smoothing is
  `analysis.smoothing`, which no verdict ever sees.)
- `cliff_status`: "cliff", "none", "provisional", "degradation", "possible", "insufficient"
  or "too_low". "possible" ("possible cliff: too few evaluations to confirm") is a fall from a
  learned peak below the lost-gain line whose drop test passes at 2α but not at α, the noise
  estimated from the curve itself (no SE logged): too large to call "none", too short to
  confirm. Like "insufficient" and "too_low" it is no verdict
  (`UNJUDGED`: `cliff` False, not counted in cliff rates).
  A run with fewer than max(2, `median_window`, `final_window`) evaluations is "insufficient"
  (no verdict; `cliff` False). A threshold at or below 0 is "too_low": nothing can fall
  below it, so the verdict is "cannot judge: accuracy too low", never "none".
- A peak at most `peak_se` (1) SE of peak − base above the base is a bump noise explains: the
  run is judged from its base (threshold base − θ), so such a bump never turns a
  degradation into a cliff (`cliff_test["reference"]` says which).
- A run still in progress (`running=True`) gets no final verdict:
  when the cliff rule already holds and its last `final_window` raw evaluations all lie below
  threshold, it is "provisional" (`cliff` True, `cliff_onset` set); otherwise "none". A dip
  that recovers before the end is never a cliff, because the smoothed series must stay below
  to the end.
- Comparisons ignore differences under 1e-9, so 0.3 − 0.1 is not "below" 0.2.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.intervals import normal_sf, student_t_quantile, t_sf
from analysis.series import EPS, as_number, as_step, clean_series, rolling_median

ACCURACY_DEFAULTS = {
    "alpha": 0.05,
    "drop_frac": 0.5,
    "min_drop": 0.0,
    "median_window": 3,
    "final_window": 3,
    "peak_se": 1.0,
}
POSSIBLE = "possible"
POSSIBLE_LABEL = "possible cliff: too few evaluations to confirm"
# A fall is a possible cliff when its drop test would pass at this multiple of `alpha` (0.1 at
# the defaults): flat noisy runs then read "possible" 1–5% of the time (docs/analysis.md).
POSSIBLE_ALPHA_FACTOR = 2
# Statuses with no verdict: too few evaluations, a threshold at or below 0 (nothing can fall
# below it, so "none" would be a claim the data cannot support), or a large fall the evidence
# is too short to confirm (neither a cliff nor "none").
UNJUDGED = ("insufficient", "too_low", POSSIBLE)
# Each `cliff_status` in the words of `cliff_label`, where a page has the status alone (no onset
# or threshold to add): the runs table's column.
STATUS_WORDS = {
    "none": "none",
    "cliff": "cliff",
    "provisional": "provisional cliff",
    "degradation": "degradation",
    "insufficient": "too few evaluations",
    "too_low": "cannot judge: accuracy too low",
    POSSIBLE: POSSIBLE_LABEL,
}


def _noise_sd(v: np.ndarray) -> float:
    """One evaluation's noise SD estimated from the series itself, when nothing else is
    logged: the robust SD (1.4826 × median |x|) of second differences a(i+1) − 2a(i) + a(i−1),
    over √6 (their SD for independent noise). Second differences cancel a steady trend, and
    the median ignores the few large ones a cliff or a kink makes; what is left inflates the
    estimate, so the fallback errs toward calling fewer cliffs."""
    if len(v) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(np.diff(v, n=2))) / math.sqrt(6))


def _drop_noise(
    s: np.ndarray,
    v: np.ndarray,
    se: np.ndarray | None,
    per_problem: Mapping | None,
    peak_idx: int,
    final_window: int,
) -> tuple[str, float]:
    """(method, SE of peak − final) from the best evidence at hand: "paired" (per-problem
    accuracies at the peak and in the final window, problems as the unit), "se"
    (`eval/accuracy_se`, evaluations independent) or "series" (estimated from the curve)."""
    tail = range(len(s) - final_window, len(s))
    if per_problem:
        peak_row = per_problem.get(as_step(s[peak_idx]))
        rows = [per_problem.get(as_step(s[i])) for i in tail]
        if peak_row is not None and all(r is not None and len(r) == len(peak_row) for r in rows):
            d = np.asarray(peak_row, float) - np.mean(np.asarray(rows, float), axis=0)
            if len(d) >= 2:
                return "paired", float(d.std(ddof=1) / math.sqrt(len(d)))
    if se is not None and np.all(np.isfinite(se[[peak_idx, *tail]])):
        final_var = float(np.sum(se[list(tail)] ** 2)) / final_window**2
        return "se", math.sqrt(float(se[peak_idx]) ** 2 + final_var)
    sd = _noise_sd(v)
    return "series", sd * math.sqrt(1 + 1 / final_window)


def _gain_noise(
    s: np.ndarray,
    v: np.ndarray,
    se: np.ndarray | None,
    per_problem: Mapping | None,
    peak_idx: int,
    method: str,
) -> float:
    """SE of peak − base, from the same evidence as the drop's (`method`)."""
    if method == "paired" and per_problem:
        base_row = per_problem.get(as_step(s[0]))
        peak_row = per_problem.get(as_step(s[peak_idx]))
        if base_row is not None and peak_row is not None and len(base_row) == len(peak_row):
            d = np.asarray(peak_row, float) - np.asarray(base_row, float)
            if len(d) >= 2:
                return float(d.std(ddof=1) / math.sqrt(len(d)))
    if se is not None and np.all(np.isfinite(se[[0, peak_idx]])):
        return math.sqrt(float(se[0]) ** 2 + float(se[peak_idx]) ** 2)
    return _noise_sd(v) * math.sqrt(2)


def summarize_accuracy(
    steps: Sequence,
    values: Sequence,
    *,
    se: Sequence | None = None,
    per_problem: Mapping | None = None,
    alpha: float = 0.05,
    drop_frac: float = 0.5,
    min_drop: float = 0.0,
    median_window: int = 3,
    final_window: int = 3,
    peak_se: float = 1.0,
    running: bool = False,
) -> dict[str, Any]:
    """Base, peak, final, gains and the terminal-cliff verdict of one `eval/accuracy` series.

    `se`: `eval/accuracy_se` aligned with `steps` (None/NaN where missing); `per_problem`:
    {step: per-problem accuracies in one fixed problem order} (`eval_problems.jsonl`).
    Either makes the noise test sharper; without them the noise is estimated from the curve.

    Returns `base`, `peak`, `peak_step`, `final`, `gain`, `final_gain`, `cliff` (bool),
    `cliff_onset` (step or None) — the docs/design.md §6 contract — plus `cliff_status` ("none",
    "cliff", "provisional", "degradation", "insufficient"), `theta` (θ), `threshold`
    (peak − θ), `cliff_test` (the evidence: see `docs/analysis.md`), `evidence` (it in one
    line, `describe_cliff`), `degradation_onset`,
    `n_evals`, `first_step`, `last_step` and `running` (echoed). With no evaluations every
    number is None.
    """
    if median_window < 1 or median_window % 2 == 0:
        raise ValueError(
            f"median_window must be a positive odd number of points, not {median_window}"
        )
    if final_window < 1:
        raise ValueError(f"final_window must be at least 1, not {final_window}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha}")
    if not peak_se >= 0:
        raise ValueError(f"peak_se must be a number of SEs at or above 0, not {peak_se}")
    se_by_step: dict[float, float | None] = {}
    if se is not None:
        if len(se) != len(steps):
            raise ValueError(f"se has {len(se)} values for {len(steps)} steps")
        # Keyed by step with the values' rules: a repeated step keeps its last SE, and a
        # missing SE stays NaN (that evaluation then cannot give "se" evidence).
        for st, x, e in zip(steps, values, se, strict=True):
            if as_number(x) is not None and as_number(st) is not None:
                se_by_step[float(st)] = as_number(e)
    s, v = clean_series(steps, values)
    se_arr = None
    if se is not None:
        se_arr = np.array([np.nan if se_by_step.get(x) is None else se_by_step[x] for x in s])
    return judge_accuracy(
        s,
        v,
        se_arr,
        per_problem,
        alpha=alpha,
        drop_frac=drop_frac,
        min_drop=min_drop,
        median_window=median_window,
        final_window=final_window,
        peak_se=peak_se,
        running=running,
    )


def judge_accuracy(
    s: np.ndarray,
    v: np.ndarray,
    se_arr: np.ndarray | None,
    per_problem: Mapping | None,
    *,
    alpha: float,
    drop_frac: float,
    min_drop: float,
    median_window: int,
    final_window: int,
    running: bool,
    peak_se: float = 1.0,
    quick: bool = False,
) -> dict[str, Any]:
    """`summarize_accuracy` on a cleaned series (sorted unique steps, finite values; `se_arr`
    aligned, NaN where missing). `quick` (the radar's prefix scan, running only): skip the
    smoothing and the evidence text when the last `final_window` values are not all below
    the threshold, since a running run is then "none" whatever the smoothing says."""
    n = len(s)
    out = _no_verdict(n, running)
    if n == 0:
        out["evidence"] = describe_cliff(out)
        return out
    peak_idx = int(np.argmax(v))  # argmax returns the first maximum: the first step attaining it
    window = min(final_window, n)
    out.update(_levels(s, v, peak_idx, window))
    ref_idx, theta, threshold, cliff_test = _drop_test(
        s,
        v,
        se_arr,
        per_problem,
        peak_idx,
        window,
        alpha=alpha,
        drop_frac=drop_frac,
        min_drop=min_drop,
        peak_se=peak_se,
    )
    out.update(theta=theta, threshold=threshold, cliff_test=cliff_test)
    if n < max(2, median_window, final_window):
        out["evidence"] = describe_cliff(out)
        return out  # too few points for the final mean and the smoothing to mean anything
    if threshold <= EPS:
        # Nothing can fall below a line at or under 0: no verdict, rather than "none".
        out["cliff_status"] = "too_low"
        out["evidence"] = describe_cliff(out)
        return out
    # The lost-gain line lies at or above the threshold, so a tail not below it is neither a
    # cliff nor a possible one.
    line = float(v[ref_idx]) - max(cliff_test["gain_margin"], cliff_test["min_drop"])
    if quick and running and not _tail_down(v, ref_idx, max(threshold, line), final_window):
        out.update(cliff_status="none", evidence=None)
        return out
    out.update(
        _stretch_verdict(
            s, v, ref_idx, threshold, out["final"], median_window, final_window, running
        )
    )
    if out["cliff_status"] == "none" and _possible(
        s, v, ref_idx, cliff_test, alpha, median_window, final_window, running, out["final"]
    ):
        out["cliff_status"] = POSSIBLE
    out["evidence"] = describe_cliff(out)
    return out


def _possible(
    s: np.ndarray,
    v: np.ndarray,
    ref_idx: int,
    test: Mapping[str, Any],
    alpha: float,
    median_window: int,
    final_window: int,
    running: bool,
    final: float,
) -> bool:
    """A large fall the evidence is too short to confirm: from a learned peak, below the line
    the lost gain alone draws (peak − max(½ gain, min_drop)) as the cliff rule reads it, and
    significant at POSSIBLE_ALPHA_FACTOR × alpha — but not past the noise margin at alpha,
    which few evaluations with no per-evaluation SE make wide (0.3, 0.5, 0.6, 0.2, 0.1, 0.1:
    p = 0.087, "none" until this rule). Only where the noise was estimated from the curve
    itself ("series"): more evaluations sharpen that estimate, while a logged SE or paired
    per-problem scores already measured the noise, and a drop within it is "none"."""
    if test["method"] != "series" or test["reference"] != "peak":
        return False
    if test["p"] >= POSSIBLE_ALPHA_FACTOR * alpha:
        return False
    line = float(v[ref_idx]) - max(test["gain_margin"], test["min_drop"])
    if not test["noise_margin"] > max(test["gain_margin"], test["min_drop"]):
        return False  # the lost gain set the line: the verdict already read this fall
    verdict = _stretch_verdict(s, v, ref_idx, line, final, median_window, final_window, running)
    return verdict["cliff_status"] in ("cliff", "provisional")


def _no_verdict(n: int, running: bool) -> dict[str, Any]:
    """The result's every key, in its order, as a run with no evaluation has them."""
    return {
        "base": None,
        "peak": None,
        "peak_step": None,
        "final": None,
        "gain": None,
        "final_gain": None,
        "cliff": False,
        "cliff_onset": None,
        "cliff_status": "insufficient",
        "theta": None,
        "threshold": None,
        "cliff_test": None,
        "degradation_onset": None,
        "n_evals": n,
        "first_step": None,
        "last_step": None,
        "running": bool(running),
    }


def _levels(s: np.ndarray, v: np.ndarray, peak_idx: int, window: int) -> dict[str, Any]:
    """Base, peak, final (the mean of the last `window` evaluations), the gains, the ends."""
    base, peak = float(v[0]), float(v[peak_idx])
    final = float(np.mean(v[-window:]))
    return {
        "base": base,
        "peak": peak,
        "peak_step": as_step(s[peak_idx]),
        "final": final,
        "gain": peak - base,
        "final_gain": final - base,
        "first_step": as_step(s[0]),
        "last_step": as_step(s[-1]),
    }


def _drop_test(
    s: np.ndarray,
    v: np.ndarray,
    se_arr: np.ndarray | None,
    per_problem: Mapping | None,
    peak_idx: int,
    window: int,
    *,
    alpha: float,
    drop_frac: float,
    min_drop: float,
    peak_se: float,
) -> tuple[int, float, float, dict]:
    """(the index judged from — the peak, or the base when the peak is a bump noise
    explains —, θ, the threshold, the `cliff_test` record of how θ and p came about)."""
    n = len(v)
    base, peak = float(v[0]), float(v[peak_idx])
    method, se_drop = _drop_noise(s, v, se_arr, per_problem, peak_idx, window)
    z = _drop_z(alpha, n, method)
    # A peak no more than `peak_se` SEs above the base is a bump evaluation noise explains:
    # the run is judged from its base, so cliff versus degradation never hinges on it.
    se_gain = _gain_noise(s, v, se_arr, per_problem, peak_idx, method) if peak_idx else 0.0
    learned = peak_idx > 0 and peak - base > peak_se * se_gain + EPS
    ref_idx = peak_idx if learned else 0
    ref = float(v[ref_idx])
    if ref_idx != peak_idx:
        method, se_drop = _drop_noise(s, v, se_arr, per_problem, ref_idx, window)
    gain_margin = drop_frac * (ref - base)
    noise_margin = z * se_drop
    theta = max(min_drop, gain_margin, noise_margin)
    drop = ref - float(np.mean(v[-window:]))
    test = {
        "method": method,
        "drop": drop,
        "se_drop": se_drop,
        "z": z,
        "alpha": alpha,
        "n_compared": n,
        "noise_margin": noise_margin,
        "gain_margin": gain_margin,
        "min_drop": min_drop,
        "p": _drop_p(drop, se_drop, method, n),
        "reference": "peak" if learned else "base",
        "se_gain": se_gain,
        "peak_se": peak_se,
    }
    return ref_idx, theta, ref - theta, test


def _drop_z(alpha: float, n: int, method: str) -> float:
    """How many SEs of the drop noise explains. The peak is the largest of n noisy
    evaluations, so a drop from it is judged at the Bonferroni level α/n: a flat, noisy run
    then calls a cliff at most α of the time."""
    if method == "series" and n >= 3:
        # The SD is itself estimated, from n − 2 second differences: Student's t with that
        # many degrees of freedom in place of the normal keeps the level (measured: at most
        # 5% false cliffs on flat runs of 6–100 evaluations, docs/analysis.md).
        return student_t_quantile(1 - alpha / n, n - 2)
    return statistics.NormalDist().inv_cdf(1 - alpha / n)


def _drop_p(drop: float, se_drop: float, method: str, n: int) -> float:
    """The drop's one-sided p-value, Bonferroni-corrected over the n evaluations."""
    if se_drop <= 0:
        return 0.0 if drop > EPS else 1.0
    x = drop / se_drop
    if method == "series" and n >= 3:
        tail = t_sf(x, n - 2)  # Student's t, as in `_drop_z`
    else:
        tail = normal_sf(x)
    return min(1.0, n * tail)


def _tail_down(v: np.ndarray, ref_idx: int, threshold: float, final_window: int) -> bool:
    """Whether the last `final_window` evaluations, all after the reference, lie below the
    threshold."""
    return len(v) - final_window > ref_idx and bool(np.all(v[-final_window:] < threshold - EPS))


def _stretch_verdict(
    s: np.ndarray,
    v: np.ndarray,
    ref_idx: int,
    threshold: float,
    final: float,
    median_window: int,
    final_window: int,
    running: bool,
) -> dict[str, Any]:
    """The verdict's fields from the final stretch of the smoothed series below threshold:
    a cliff (provisional while running), degradation (nothing learned), or none."""
    n = len(v)
    below = rolling_median(v, median_window) < threshold - EPS
    # Start of the final stretch below threshold: one past the last index that is not below.
    not_below = np.flatnonzero(~below)
    start = int(not_below[-1]) + 1 if len(not_below) else 0
    start = max(start, ref_idx + 1)  # the cliff comes after the peak, by definition
    is_cliff = final < threshold - EPS and start < n
    status = "cliff" if is_cliff else "none"
    if running and is_cliff:
        # An unfinished run may still recover: only call it when it is already down for the
        # whole final window, and then only provisionally.
        tail_down = _tail_down(v, ref_idx, threshold, final_window)
        status = "provisional" if tail_down else "none"
        is_cliff = tail_down
    if is_cliff and ref_idx == 0:
        # Nothing was learned above the base (or only a bump within noise): a fall below it
        # is degradation, not a cliff from a learned peak.
        return {"cliff_status": "degradation", "degradation_onset": as_step(s[start])}
    return {
        "cliff": bool(is_cliff),
        "cliff_onset": as_step(s[start]) if is_cliff else None,
        "cliff_status": status,
    }


def describe_cliff(accuracy: Mapping[str, Any] | None) -> str:
    """The verdict with its threshold and evidence, in one line for a page's hover or cell:
    "peak 0.067 (step 20) → final 0.000; threshold 0.041 = peak − θ, θ = 0.026 = max(½ gain
    0.008, 2.58 × SE 0.010 of the drop [se]); one-sided p = 0.0004 over 10 evaluations"."""
    acc = accuracy or {}
    test = acc.get("cliff_test")
    if acc.get("peak") is None or not test:
        return "no evaluations"
    from_base = test.get("reference") == "base" and acc.get("peak_step") != acc.get("first_step")
    if from_base:
        text = (
            f"peak {acc['peak']:.3f} (step {acc['peak_step']}) is within "
            f"{test['peak_se']:g} SE ({test['se_gain']:.4f}) of the base {acc['base']:.3f}, "
            f"so the run is judged from its base → final {acc['final']:.3f}; "
            f"threshold {acc['threshold']:.3f} = base − θ"
        )
    else:
        text = (
            f"peak {acc['peak']:.3f} (step {acc['peak_step']}) → final {acc['final']:.3f}; "
            f"threshold {acc['threshold']:.3f} = peak − θ"
        )
    text += (
        f", θ = {acc['theta']:.3f} = max({test['gain_margin']:.3f} lost gain, {test['z']:.2f} × "
        f"SE {test['se_drop']:.4f} of the drop [{test['method']}]"
    )
    if test.get("min_drop"):
        text += f", floor {test['min_drop']:.3f}"
    n = test["n_compared"]
    text += f"); one-sided p = {test['p']:.2g} over {n} evaluation{'' if n == 1 else 's'}"
    status = acc.get("cliff_status")
    if status == "insufficient":
        text += "; too few evaluations for a verdict"
    elif status == "too_low":
        text += "; cannot judge: accuracy too low (nothing can fall below a threshold at 0)"
    elif status == POSSIBLE:
        text += (
            f"; {POSSIBLE_LABEL}: below the lost-gain line, but evaluation noise could explain "
            f"the drop at α {test['alpha']:g}"
        )
    elif status == "degradation":
        text += f"; no learned peak: below the base from step {acc['degradation_onset']}"
    return text


def cliff_label(accuracy: Mapping[str, Any] | None) -> str:
    """The verdict in a few words, the same on every page (run page, experiment page, compare
    table, panel): "cliff @140", "provisional cliff @140", "degradation @20", "none",
    "none so far", "below the line: not judged yet" (running, final under the threshold but
    not for the whole final window), "cannot judge: accuracy too low", "possible cliff: too
    few evaluations to confirm", "too few evaluations" or "no evaluations"."""
    acc = accuracy or {}
    status = acc.get("cliff_status") or "insufficient"
    if acc.get("peak") is None:
        return "no evaluations"
    if status in UNJUDGED:
        return STATUS_WORDS[status]
    if status == "cliff":
        return f"cliff @{acc.get('cliff_onset')}"
    if status == "provisional":
        return f"provisional cliff @{acc.get('cliff_onset')}"
    if status == "degradation":
        prefix = "provisional degradation" if acc.get("running") else "degradation"
        return f"{prefix} @{acc.get('degradation_onset')}"
    if acc.get("running"):
        final, threshold = acc.get("final"), acc.get("threshold")
        if final is not None and threshold is not None and final < threshold - EPS:
            return "below the line: not judged yet"
        return "none so far"
    return "none"
