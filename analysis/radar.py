"""The live radar: which §6 events a run has shown so far, each with the step it happened at.

`radar(series)` is called on the series of a run that may still be training (Troupe's own or
one logged through the API), as often as every step, and returns a list of events. It is
stateless and deterministic: the events are a function of the points given. It imports only
the standard library, numpy and the vocabulary (the web process and the trainer's stop policy
call it).

Idempotence. Every event that is not `provisional` is *causal*: whether it exists and its
`step` depend only on points up to its `seen_at` step, so calling the radar again with more
points returns it unchanged (the later call's events are a superset of the earlier call's
non-provisional events). Provisional events may move or vanish; they say so.

Events (`kind`, per `role` where it has one):

- `cliff` (`role` None, key `eval/accuracy`): the §6 cliff test (`summarize_accuracy` with
  `running=True`) on each prefix of the evaluations. While the latest prefix says
  "provisional", the event is provisional at its `cliff_onset`. It is confirmed (no longer
  provisional) at the first prefix where the provisional verdict holds with at least
  `cliff_confirm` (5) evaluations at or after the onset; `seen_at` is that evaluation's step.
  Once confirmed, the event stays even if the run recovers later (the alert happened; the
  terminal §6 verdict is `cliff_status` of the result). A further cliff is only raised after
  a prefix whose verdict is "none" (the run recovered) — a long fall is one event. A finished
  run (`running=False`) whose §6 verdict is "cliff" gets that cliff as a confirmed event.
- `amplification` (key `role/<r>/grad_norm`): the §6 onset with a baseline that no longer
  grows. With `total_steps` (the run's planned steps) the baseline is the logged points with
  step − first step < `baseline_frac` × total_steps (at least 3 points), fixed once a point at
  or past that boundary is logged; before that there is no event. On a finished run logged at
  every step, this is exactly `amplification_onset` (first 20% of points by count); for a run
  that stopped early, pass the steps it ran (last step + 1) to match `summarize_run`. Without
  `total_steps` (an external run with no planned length) the baseline is the first 20% of the
  points so far, so the event is provisional while the run is running.
- `capture` (shared policies only, as in `summarize_run`; key `role/<r>/grad_share`): the
  first logged step at which the §6 capture rule holds for the points so far (the role's
  share > `capture_threshold` in more than `capture_majority` of the later half of the logged
  steps, more often than any other role), with at least `capture_min_steps` (10) logged steps:
  `analysis.capture.capture_verdict`, the function every page calls.
- `entropy_collapse` (key `role/<r>/entropy`): the reference is the median of the role's first
  `entropy_ref_points` (10) logged values; a collapse is `entropy_consecutive` (5) consecutive
  logged values after those, each below `entropy_frac` (0.5) × reference; the event is at the
  first of them. No event when the reference is not positive.
- `evaluator_accepts_wrong` (role "evaluator", key `behav/evaluator_accept_wrong`):
  `accept_wrong_consecutive` (3) consecutive logged values above `accept_wrong_threshold`
  (0.9) — the evaluator waves more than 90% of the wrong candidates through, so the
  generator is rewarded for whatever it writes; the event is at the first of them.
- `voter_collapse` (role None, key `behav/voter_agreement`): diversity collapse. The
  reference is the median of the first `voter_ref_points` (5) logged values; when it is below
  `voter_agreement_threshold` (0.95), `voter_consecutive` (5) consecutive logged values after
  those at or above the threshold are a collapse, at the first of them. Voters that agreed
  from the start (reference at the threshold already) never collapsed: no event.
  (`behavioural_events`; both series are logged only in steps with such episodes.)
- `zero_std_groups` (role None, key `train/frac_zero_std`): `zero_std_consecutive` (5)
  consecutive logged values above `zero_std_threshold` (0.5) — most GRPO groups give no
  learning signal; the event is at the first of them.
- `reward_hacking_suspected` (role None, key `sandbox/verdict_disagreements`): the first step
  at which an independent re-check (trainer/rollout.py's second opinion on code rewards)
  failed an answer the verifier had passed — "reward hacking suspected": the policy may have
  found a hole in the verifier, and every accuracy after it may be fiction. `limit` is 0
  (`reward_hacking_events`).
- `non_finite_loss` / `non_finite_reward` (role None, keys `train/loss`, `train/reward`):
  the first step at which the training loss (or reward) was logged without a finite value —
  NaN, ±inf, or a gap, which is how the store keeps a NaN — a diverged update or a broken
  reward function, worth a look at once (`non_finite_events`). `value` and `limit` are None.
  Causal, and read from the raw series: every other rule drops such points as missing.

Each kind is raised once per role (the first occurrence), except `cliff` (see above). Every
event is `{"kind", "role", "key", "step", "seen_at", "provisional", "value", "limit"}`:
`value` is the metric at `step`, `limit` the line it crossed (the accuracy threshold
peak − θ, the gradient-norm limit, the capture threshold, entropy_frac × reference, the
zero-std threshold). Events are sorted by (step, kind, role).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.amplification import (
    AMPLIFICATION_DEFAULTS,
    amplification_verdict,
    planned_amplification,
)
from analysis.capture import CAPTURE_DEFAULTS, capture_verdict
from analysis.cliffs import ACCURACY_DEFAULTS, judge_accuracy, summarize_accuracy
from analysis.runs import split_thresholds
from analysis.series import EPS, align_by_step, as_number, as_step, clean_series
from vocabulary.names import (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    ENTROPY,
    EVALUATOR_ACCEPT_WRONG_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    LOSS_KEY,
    REWARD_KEY,
    SHARED,
    VERDICT_DISAGREEMENTS_KEY,
    VOTER_AGREEMENT_KEY,
    ZERO_STD_KEY,
    radar_reads,
    role_key,
    roles_in,
)

# The training figures whose non-finite value is itself an alert, with the event's kind (the
# loss is the trainer's, trainer/update.py, and the key-map's name for a client's loss).
NON_FINITE_KINDS = {LOSS_KEY: "non_finite_loss", REWARD_KEY: "non_finite_reward"}

RADAR_DEFAULTS = {
    "cliff_confirm": 5,
    "entropy_ref_points": 10,
    "entropy_frac": 0.5,
    "entropy_consecutive": 5,
    "zero_std_threshold": 0.5,
    "zero_std_consecutive": 5,
    # The behaviour rules (`behavioural_events`).
    "accept_wrong_threshold": 0.9,
    "accept_wrong_consecutive": 3,
    "voter_agreement_threshold": 0.95,
    "voter_ref_points": 5,
    "voter_consecutive": 5,
}


def radar(
    series: Mapping[str, tuple[Sequence, Sequence]],
    *,
    running: bool = True,
    sharing: str | None = None,
    total_steps: int | None = None,
    **thresholds: Any,
) -> dict[str, Any]:
    """The events of one run so far, from `{key: (steps, values)}` (docs/design.md §5 names).

    `running`: the run may still log points (False: finished, verdicts are final).
    `sharing`: capture is looked for when it is "shared" or not given, as in `summarize_run`.
    `total_steps`: the run's planned number of steps, which fixes the amplification baseline.
    `thresholds`: the `summarize_run` keywords (min_drop, drop_frac, median_window, final_window,
    baseline_frac, k_mad, consecutive, mad_floor, capture_threshold, capture_majority) and
    the radar's own (`RADAR_DEFAULTS`: cliff_confirm, entropy_ref_points,
    entropy_frac, entropy_consecutive, zero_std_threshold, zero_std_consecutive, and the
    behaviour rules' accept_wrong_threshold, accept_wrong_consecutive,
    voter_agreement_threshold, voter_ref_points, voter_consecutive).

    Returns `{"events": [...], "cliff_status", "last_step", "thresholds"}`: the events (see
    the module docstring), the §6 verdict on the accuracy so far (`summarize_accuracy` with
    `running`), the largest step with a value among the series the radar reads (None when
    none has one) and every threshold used.
    """
    own, acc_kw, amp_kw, cap_kw = _radar_thresholds(thresholds)
    if total_steps is not None and not total_steps > 0:
        raise ValueError(f"total_steps must be positive or None, not {total_steps}")

    # Only the keys the radar reads are cleaned: a run logs dozens of others.
    clean = {key: clean_series(*pair) for key, pair in series.items() if radar_reads(key)}
    events: list[dict[str, Any]] = []
    cliff_events, status = _cliff_events(
        clean.get(ACCURACY_KEY), clean.get(ACCURACY_SE_KEY), running, own, acc_kw
    )
    events += cliff_events
    events += _role_events(clean, running, sharing, total_steps, own, amp_kw, cap_kw)
    events += behavioural_events(clean, own)
    events += reward_hacking_events(clean)
    events += _zero_std_events(clean, own)
    events += non_finite_events(series)
    last = [float(s[-1]) for s, _ in clean.values() if len(s)]
    events.sort(key=lambda e: (e["step"], e["kind"], e["role"] or ""))
    return {
        "events": events,
        "cliff_status": status,
        "last_step": as_step(max(last)) if last else None,
        "thresholds": {
            **ACCURACY_DEFAULTS,
            **acc_kw,
            **AMPLIFICATION_DEFAULTS,
            **amp_kw,
            **{f"capture_{k}": v for k, v in {**CAPTURE_DEFAULTS, **cap_kw}.items()},
            **own,
        },
    }


def _radar_thresholds(thresholds: Mapping[str, Any]) -> tuple[dict, dict, dict, dict]:
    """(the radar's own thresholds over `RADAR_DEFAULTS`, and `split_thresholds` of the
    rest: the accuracy, amplification and capture keywords); raises on an unknown name or a
    count that is not a positive whole number."""
    own = dict(RADAR_DEFAULTS)
    rest = {}
    for name, value in thresholds.items():
        (own if name in RADAR_DEFAULTS else rest)[name] = value
    known = [*ACCURACY_DEFAULTS, *AMPLIFICATION_DEFAULTS, *RADAR_DEFAULTS]
    known += [f"capture_{k}" for k in CAPTURE_DEFAULTS]
    unknown = sorted(set(rest) - set(known))
    if unknown:
        raise TypeError(f"unknown threshold {unknown[0]!r}; known: {', '.join(known)}")
    acc_kw, amp_kw, cap_kw = split_thresholds(rest)  # raises on an unknown name
    for name in ("cliff_confirm", "entropy_ref_points"):
        if int(own[name]) != own[name] or own[name] < 1:
            raise ValueError(f"{name} must be a positive whole number, not {own[name]}")
    for name in ("entropy_consecutive", "zero_std_consecutive"):
        if int(own[name]) != own[name] or own[name] < 1:
            raise ValueError(f"{name} must be a positive whole number, not {own[name]}")
    return own, acc_kw, amp_kw, cap_kw


def _role_events(
    clean: Mapping[str, tuple[np.ndarray, np.ndarray]],
    running: bool,
    sharing: str | None,
    total_steps: int | None,
    own: dict,
    amp_kw: dict,
    cap_kw: dict,
) -> list[dict[str, Any]]:
    """Each role's amplification and entropy collapse, then capture between the roles of
    one shared policy."""
    events: list[dict[str, Any]] = []
    roles = roles_in(clean)
    for role in roles:
        key = role_key(role, GRAD_NORM)
        if key in clean:
            events += _amplification(key, role, *clean[key], running, total_steps, amp_kw)
        key = role_key(role, ENTROPY)
        if key in clean:
            events += _entropy_collapse(key, role, *clean[key], own)
    share_roles = [r for r in roles if role_key(r, GRAD_SHARE) in clean]
    if sharing in (None, SHARED) and len(share_roles) >= 2:
        events += _capture(clean, share_roles, running, own, cap_kw)
    return events


def _zero_std_events(
    clean: Mapping[str, tuple[np.ndarray, np.ndarray]], own: dict
) -> list[dict[str, Any]]:
    """The first stretch of `zero_std_consecutive` steps with the share of zero-std groups
    over `zero_std_threshold`, as one event ([] when there is none)."""
    if ZERO_STD_KEY not in clean:
        return []
    s, v = clean[ZERO_STD_KEY]
    first = _first_run(v > own["zero_std_threshold"] + EPS, own["zero_std_consecutive"])
    if first is None:
        return []
    k = first + own["zero_std_consecutive"] - 1
    threshold = own["zero_std_threshold"]
    return [
        _event("zero_std_groups", None, ZERO_STD_KEY, s[first], s[k], False, v[first], threshold)
    ]


def non_finite_events(series: Mapping[str, tuple[Sequence, Sequence]]) -> list[dict[str, Any]]:
    """One event per key of `NON_FINITE_KINDS` that has a point with no finite value (None,
    NaN or ±inf), at the first such step. Read before any cleaning, since `clean_series`
    drops exactly these points."""
    events = []
    for key, kind in NON_FINITE_KINDS.items():
        if key not in series:
            continue
        steps, values = series[key]
        if len(steps) != len(values):
            raise ValueError(f"{key}: steps and values differ in length")
        bad = [
            float(step)
            for step, value in zip(steps, values, strict=True)
            if step is not None and (value is None or not math.isfinite(float(value)))
        ]
        if bad:
            first = min(bad)
            events.append(_event(kind, None, key, first, first, False, math.nan, None))
    return events


def _event(kind, role, key, step, seen_at, provisional, value, limit) -> dict[str, Any]:
    value = float(value)
    return {
        "kind": kind,
        "role": role,
        "key": key,
        "step": as_step(step),
        "seen_at": as_step(seen_at),
        "provisional": bool(provisional),
        "value": value if math.isfinite(value) else None,
        "limit": None if limit is None else float(limit),
    }


def behavioural_events(clean: Mapping[str, tuple[np.ndarray, np.ndarray]], own: Mapping) -> list:
    """The two rules on behaviour metrics (module docstring): an evaluator that accepts wrong
    answers, voters whose answers collapsed to one. `clean`: cleaned series by key; `own`: the
    radar's thresholds. Both are causal (each depends only on the points up to `seen_at`)."""
    for name in ("accept_wrong_consecutive", "voter_ref_points", "voter_consecutive"):
        if int(own[name]) != own[name] or own[name] < 1:
            raise ValueError(f"{name} must be a positive whole number, not {own[name]}")
    for name in ("accept_wrong_threshold", "voter_agreement_threshold"):
        if not 0 <= own[name] <= 1:
            raise ValueError(f"{name} is a share: between 0 and 1, not {own[name]}")
    events = []
    if EVALUATOR_ACCEPT_WRONG_KEY in clean:
        s, v = clean[EVALUATOR_ACCEPT_WRONG_KEY]
        limit, length = own["accept_wrong_threshold"], own["accept_wrong_consecutive"]
        first = _first_run(v > limit + EPS, length)
        if first is not None:
            events.append(
                _event(
                    "evaluator_accepts_wrong",
                    "evaluator",
                    EVALUATOR_ACCEPT_WRONG_KEY,
                    s[first],
                    s[first + length - 1],
                    False,
                    v[first],
                    limit,
                )
            )
    if VOTER_AGREEMENT_KEY in clean:
        s, v = clean[VOTER_AGREEMENT_KEY]
        ref_points, length = own["voter_ref_points"], own["voter_consecutive"]
        limit = own["voter_agreement_threshold"]
        # Agreement at the threshold from the start is the base model's habit, not a collapse.
        if len(v) > ref_points and float(np.median(v[:ref_points])) < limit - EPS:
            first = _first_run(v >= limit - EPS, length, start=ref_points)
            if first is not None:
                events.append(
                    _event(
                        "voter_collapse",
                        None,
                        VOTER_AGREEMENT_KEY,
                        s[first],
                        s[first + length - 1],
                        False,
                        v[first],
                        limit,
                    )
                )
    return events


def reward_hacking_events(clean: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> list:
    """`reward_hacking_suspected` at the first step whose passing answers an independent
    re-check failed (`sandbox/verdict_disagreements` above 0): one disagreement is already a
    verifier hole or a verifier bug. Causal: it depends on that step's point alone."""
    if VERDICT_DISAGREEMENTS_KEY not in clean:
        return []
    s, v = clean[VERDICT_DISAGREEMENTS_KEY]
    hits = np.flatnonzero(v > EPS)
    if not len(hits):
        return []
    first = int(hits[0])
    key = VERDICT_DISAGREEMENTS_KEY
    return [_event("reward_hacking_suspected", None, key, s[first], s[first], False, v[first], 0)]


def _first_run(mask: np.ndarray, length: int, start: int = 0) -> int | None:
    """Index of the first of `length` consecutive True values at or after `start`, or None."""
    if len(mask) - start < length:
        return None
    runs = np.convolve(mask[start:].astype(int), np.ones(length, dtype=int), mode="valid")
    hits = np.flatnonzero(runs == length)
    return start + int(hits[0]) if len(hits) else None


def prefix_cliff_statuses(
    steps: Sequence,
    values: Sequence,
    *,
    se: Sequence | None = None,
    per_problem: Mapping | None = None,
    **acc_kw: Any,
) -> list[dict[str, Any]]:
    """For every prefix of an accuracy series (the evaluations up to each step), what
    `summarize_accuracy(..., running=True)` says of it: `{"step", "cliff_status",
    "cliff_onset", "threshold"}` per evaluation, in step order.

    It calls `summarize_accuracy` itself on each prefix, so the radar, the stop policy and
    the pages share one cliff rule (a faster re-implementation drifted from it once). A
    series holds one point per evaluation (tens to a few hundred), so this stays in
    milliseconds.
    """
    s, v = clean_series(steps, values)
    se_arr = None
    if se is not None:
        if len(se) != len(steps):
            raise ValueError(f"se has {len(se)} values for {len(steps)} steps")
        by_step = {float(a): as_number(b) for a, b in zip(steps, se, strict=True) if a is not None}
        se_arr = np.array([np.nan if by_step.get(x) is None else by_step[x] for x in s])
    kw = {**ACCURACY_DEFAULTS, **acc_kw}
    if kw["median_window"] < 1 or kw["median_window"] % 2 == 0:
        window = kw["median_window"]
        raise ValueError(f"median_window must be a positive odd number of points, not {window}")
    if kw["final_window"] < 1:
        raise ValueError(f"final_window must be at least 1, not {kw['final_window']}")
    out = []
    for j in range(len(s)):
        m = j + 1
        summary = judge_accuracy(
            s[:m],
            v[:m],
            None if se_arr is None else se_arr[:m],
            per_problem,
            running=True,
            quick=True,
            **kw,
        )
        out.append(
            {
                "step": as_step(s[j]),
                "cliff_status": summary["cliff_status"],
                "cliff_onset": summary["cliff_onset"],
                "degradation_onset": summary["degradation_onset"],
                "threshold": summary["threshold"],
            }
        )
    return out


def _cliff_events(
    acc: tuple[np.ndarray, np.ndarray] | None,
    acc_se: tuple[np.ndarray, np.ndarray] | None,
    running: bool,
    own: dict,
    acc_kw: dict,
) -> tuple[list[dict], str]:
    if acc is None or not len(acc[0]):
        return [], "insufficient"
    s, v = acc
    se = None
    if acc_se is not None:
        by_step = dict(zip(acc_se[0].tolist(), acc_se[1].tolist(), strict=True))
        se = [by_step.get(x) for x in s.tolist()]
        acc_kw = {**acc_kw, "se": se}
    events = []
    # (kind, onset) of the events raised: a fall that re-arms after a "none" prefix (the last
    # evaluations not all below while the smoothed series still is) and fires again with the
    # same onset is the same event, and an alert row is unique on (kind, role, step) (issue
    # 35: the duplicate failed the whole upsert and left the run's alerts stale).
    raised: set[tuple[str, float]] = set()
    armed = True  # False from a confirmed cliff until the run is seen to recover
    for row in prefix_cliff_statuses(s, v, **acc_kw):
        if row["cliff_status"] == "none":
            armed = True
        elif row["cliff_status"] in ("provisional", "degradation") and armed:
            # A fall below a base never beaten is "degradation", judged and confirmed alike.
            kind = "cliff" if row["cliff_status"] == "provisional" else "degradation"
            onset = row["cliff_onset"] if kind == "cliff" else row["degradation_onset"]
            if (kind, onset) in raised:
                armed = False  # the same fall, seen again after a wobble
            elif (
                int(np.count_nonzero(s[: np.searchsorted(s, row["step"]) + 1] >= onset))
                >= own["cliff_confirm"]
            ):
                raised.add((kind, onset))
                at = int(np.searchsorted(s, onset))
                events.append(
                    _event(
                        kind,
                        None,
                        ACCURACY_KEY,
                        onset,
                        row["step"],
                        False,
                        v[at],
                        row["threshold"],
                    )
                )
                armed = False
    summary = summarize_accuracy(s, v, running=running, **acc_kw)
    status = summary["cliff_status"]
    if armed and status in ("provisional", "cliff", "degradation"):
        degraded = status == "degradation"
        kind = "degradation" if degraded else "cliff"
        onset = summary["degradation_onset"] if degraded else summary["cliff_onset"]
        if (kind, onset) not in raised:
            events.append(
                _event(
                    kind,
                    None,
                    ACCURACY_KEY,
                    onset,
                    s[-1],
                    status == "provisional" or (degraded and running),
                    v[int(np.searchsorted(s, onset))],
                    summary["threshold"],
                )
            )
    return events, status


def _amplification(
    key: str,
    role: str,
    s: np.ndarray,
    v: np.ndarray,
    running: bool,
    total_steps: int | None,
    amp_kw: dict,
) -> list[dict]:
    consecutive = amp_kw.get("consecutive", 3)
    if total_steps is None:
        # No planned length: the baseline is 20% of what exists so far, so it keeps moving.
        verdict = amplification_verdict(s, v, **amp_kw)
        if verdict["onset"] is None:
            return []
        i = int(np.searchsorted(s, verdict["onset"]))
        seen = s[min(i + consecutive - 1, len(s) - 1)] if not running else s[-1]
        return [_event("amplification", role, key, s[i], seen, running, v[i], verdict["limit"])]
    found = planned_amplification(s, v, total_steps, **amp_kw)
    if found is None or found["index"] is None:
        return []
    first = found["index"]
    return [
        _event(
            "amplification",
            role,
            key,
            s[first],
            s[found["seen_index"]],
            False,
            v[first],
            found["limit"],
        )
    ]


def _entropy_collapse(key: str, role: str, s: np.ndarray, v: np.ndarray, own: dict) -> list:
    ref_points = own["entropy_ref_points"]
    if len(v) <= ref_points:
        return []
    reference = float(np.median(v[:ref_points]))
    if reference <= 0:
        return []
    limit = own["entropy_frac"] * reference
    length = own["entropy_consecutive"]
    first = _first_run(v < limit - EPS, length, start=ref_points)
    if first is None:
        return []
    return [
        _event(
            "entropy_collapse", role, key, s[first], s[first + length - 1], False, v[first], limit
        )
    ]


def _capture(clean: dict, roles: list[str], running: bool, own: dict, cap_kw: dict) -> list:
    """The capture verdict of `analysis.capture.capture_verdict` on the points so far (the rule the
    gradients page uses too), dated at the first logged step from which that role has held
    it without a break. Provisional while the run is running: the verdict is about the last
    half of the run, which moves as the run goes on."""
    steps, shares = align_by_step({r: clean[role_key(r, GRAD_SHARE)] for r in roles})
    n = len(steps)
    min_steps = cap_kw.get("min_steps", CAPTURE_DEFAULTS["min_steps"])
    role = capture_verdict(steps, shares, **cap_kw)["role"]  # None too below min_steps
    if role is None:
        return []
    # When did it start? Per prefix of m logged steps, the same rule as `capture` (share above
    # the threshold in more than `majority` of the later half, more often than any other
    # role), vectorised over every m; the event is at the start of the final stretch of
    # prefixes that name this role.
    threshold = cap_kw.get("threshold", CAPTURE_DEFAULTS["threshold"])
    majority = cap_kw.get("majority", CAPTURE_DEFAULTS["majority"])
    table = np.array([shares[r] for r in roles], dtype=float)
    with np.errstate(invalid="ignore"):
        above = np.nan_to_num(table, nan=-np.inf) > threshold + EPS
    cum = np.concatenate([np.zeros((len(roles), 1)), np.cumsum(above, axis=1)], axis=1)
    m = np.arange(1, n + 1)
    frac = (cum[:, m] - cum[:, m // 2]) / (m - m // 2)  # (roles, n)
    i = roles.index(role)
    others = np.delete(frac, i, axis=0).max(axis=0)
    holds = (frac[i] > majority + EPS) & (frac[i] > others)
    not_holding = np.flatnonzero(~holds)
    first = int(not_holding[-1]) + 1 if len(not_holding) else 0
    first = min(max(first, min_steps - 1), n - 1)
    return [
        _event(
            "capture",
            role,
            role_key(role, GRAD_SHARE),
            steps[first],
            steps[-1],
            running,
            shares[role][first],
            threshold,
        )
    ]
