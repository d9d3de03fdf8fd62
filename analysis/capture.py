"""Capture of a shared policy by one role (docs/design.md §6, docs/analysis.md "Capture").

A role captures the policy when its `grad_share` exceeds `threshold` (0.6) in more than
`majority` (50%) of the logged steps of the last half of the run (the later half of the
logged steps, by count), more often than any other role — judged only from `min_steps` (10)
logged steps on. Before that the verdict is "too few steps" (with 4 logged steps
the last half is 2 steps, and the verdict flipped from role to role as the run trained).
`capture_verdict` is the one function every page and the radar call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from analysis.series import EPS

CAPTURE_DEFAULTS = {"threshold": 0.6, "majority": 0.5, "min_steps": 10}
CAPTURED, NO_CAPTURE, TOO_FEW_STEPS = "captured", "none", "too_few_steps"


def capture_fractions(
    steps: Sequence, shares_by_role: Mapping[str, Sequence], *, threshold: float = 0.6
) -> dict[str, float]:
    """Per role, the fraction of the last half's logged steps where its share > threshold.

    `shares_by_role` maps role → values aligned with `steps` (NaN/None: not logged then).
    A step counts as logged when any role has a share there; the last half is the later
    ceil(n/2) of those steps.
    """
    roles = list(shares_by_role)
    if not roles:
        return {}
    s = np.asarray(list(steps), dtype=float)
    table = np.full((len(roles), len(s)), np.nan)
    for i, role in enumerate(roles):
        vals = shares_by_role[role]
        if len(vals) != len(s):
            raise ValueError(f"shares of {role!r} have {len(vals)} values for {len(s)} steps")
        table[i] = [np.nan if x is None else x for x in vals]
    logged = np.isfinite(table).any(axis=0) & np.isfinite(s)
    s, table = s[logged], table[:, logged]
    order = np.argsort(s, kind="stable")
    table = table[:, order]
    n = table.shape[1]
    if n == 0:
        return {role: 0.0 for role in roles}
    last_half = table[:, n // 2 :]  # the later ceil(n/2) steps
    with np.errstate(invalid="ignore"):
        over = np.nan_to_num(last_half, nan=-np.inf) > threshold + EPS
    return {role: float(over[i].mean()) for i, role in enumerate(roles)}


def logged_steps(steps: Sequence, shares_by_role: Mapping[str, Sequence]) -> int:
    """How many steps have a share of some role (the evidence capture is judged on)."""
    s = np.asarray(list(steps), dtype=float)
    logged = np.zeros(len(s), dtype=bool)
    for vals in shares_by_role.values():
        logged |= np.array([x is not None and np.isfinite(x) for x in vals], dtype=bool)
    return int(np.count_nonzero(logged & np.isfinite(s)))


def capture_verdict(
    steps: Sequence,
    shares_by_role: Mapping[str, Sequence],
    *,
    threshold: float = 0.6,
    majority: float = 0.5,
    min_steps: int = 10,
) -> dict:
    """`{"role", "status", "fractions", "n_steps"}`: the capturing role (or None), the status
    "captured", "none" or "too_few_steps" (fewer than `min_steps` logged steps: no verdict,
    and no fractions either), the fractions of `capture_fractions` and the logged steps."""
    if int(min_steps) != min_steps or min_steps < 1:
        raise ValueError(f"min_steps must be a positive whole number, not {min_steps}")
    n = logged_steps(steps, shares_by_role)
    if n < min_steps:
        return {"role": None, "status": TOO_FEW_STEPS, "fractions": {}, "n_steps": n}
    fractions = capture_fractions(steps, shares_by_role, threshold=threshold)
    winners = sorted(
        ((f, r) for r, f in fractions.items() if f > majority + EPS),
        reverse=True,
    )
    role = None
    if winners and not (len(winners) > 1 and winners[0][0] == winners[1][0]):
        role = winners[0][1]
    status = CAPTURED if role is not None else NO_CAPTURE
    return {"role": role, "status": status, "fractions": fractions, "n_steps": n}


def capture(steps: Sequence, shares_by_role: Mapping[str, Sequence], **kw) -> str | None:
    """The role whose grad_share exceeds `threshold` in more than `majority` of the logged
    steps of the last half of the run, once `min_steps` steps are logged, else None.
    Meaningful for a shared policy, where the shares of one step sum to 1 and at most one role
    can pass 0.6.

    Should two roles qualify (shares from different policies), the one that does so most
    often wins; an exact tie gives None rather than an arbitrary pick.
    """
    return capture_verdict(steps, shares_by_role, **kw)["role"]
