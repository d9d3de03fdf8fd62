"""Which role delivered a run's gain (or its cliff): Shapley attribution over role swaps.

Torch-free (standard library and numpy). The worker, the pages, the panel and the tests call
it on per-problem accuracies of mix-and-match evaluations (`trainer/mixed_eval.py`): a
workflow evaluated with each role taken either from a "from" source (the base model; for a
cliff, the peak checkpoint) or a "to" source (the trained run; for a cliff, the checkpoint
after it). A coalition is the set of roles taken from "to"; its value v(S) is the
evaluation's accuracy, and v(all) − v(none) is the change to split among the roles.

- At most `MAX_EXACT_ROLES` (4) roles: every coalition is evaluated (2^R evaluations) and
  each role gets its exact Shapley value, φ_i = Σ_{S ⊆ N∖i} |S|!(R−|S|−1)!/R! ·
  (v(S ∪ i) − v(S)). They add up to the change exactly (efficiency); a role whose swap never
  changes an evaluation gets exactly 0.
- More roles: leave-one-out, R + 2 evaluations; a role's share is v(all) − v(all ∖ i).
- The interaction term is the change no single role explains on its own: v(all) − v(none)
  minus the sum of each role's solo effect, v({i}) − v(none) (leave-one-out: minus the sum
  of the leave-one-out shares). Positive: the roles' updates help each other.

Shapley values, the change and the interaction are linear in v, so each is the mean over
problems of a per-problem value. Their 95% intervals come from a paired bootstrap over
problems: the same resampled problems for every coalition (the evaluations share problems
and row seeds, so problem difficulty cancels), `BOOTSTRAP_DRAWS` draws from
`numpy.random.default_rng(seed)`, percentile bounds. The unit of resampling is the problem,
as in `eval/accuracy_se`; the interval says nothing about other seeds of the run.

What it assumes: roles interact only through the workflow (a role's turns see another's
outputs as text), so swapping one role's weights is a well-defined intervention; and the
evaluation is paired. docs/analysis.md says how many problems give an interval narrower than
an effect.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from analysis.intervals import Estimate

MAX_EXACT_ROLES = 4  # 2^4 = 16 evaluations; beyond, leave-one-out (R + 2)
BOOTSTRAP_DRAWS = 2000
LEVEL = 0.95

Coalition = frozenset[str]


def plan_coalitions(roles: Sequence[str]) -> list[Coalition]:
    """The coalitions (roles taken from "to") to evaluate: every subset for at most
    `MAX_EXACT_ROLES` roles (by size, then workflow order), else none, all and all-but-one."""
    roles = list(roles)
    if not roles:
        raise ValueError("attribution needs at least one role")
    if len(set(roles)) != len(roles):
        raise ValueError(f"roles repeat: {roles}")
    if len(roles) <= MAX_EXACT_ROLES:
        return [
            frozenset(combo)
            for size in range(len(roles) + 1)
            for combo in itertools.combinations(roles, size)
        ]
    full = frozenset(roles)
    return [frozenset(), full, *(full - {role} for role in roles)]


def method_for(roles: Sequence[str]) -> str:
    return "shapley" if len(roles) <= MAX_EXACT_ROLES else "leave_one_out"


def coalition_key(coalition: Coalition, roles: Sequence[str]) -> str:
    """A stable text name for storage and tables: the roles from "to" in workflow order,
    joined by '+'; the empty coalition is '-'."""
    return "+".join(r for r in roles if r in coalition) or "-"


def parse_coalition_key(key: str) -> Coalition:
    return frozenset() if key == "-" else frozenset(key.split("+"))


def _weights(n: int) -> list[float]:
    """Shapley weight of a coalition of size s not holding the role: s!(n−s−1)!/n!."""
    return [math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)]


def _per_problem(
    roles: list[str], table: Mapping[Coalition, np.ndarray], method: str
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Per-problem shares by role, the change and the interaction (each a vector over
    problems: the attribution of each problem alone)."""
    full, empty = frozenset(roles), frozenset()
    change = table[full] - table[empty]
    shares: dict[str, np.ndarray] = {}
    if method == "shapley":
        weights = _weights(len(roles))
        for role in roles:
            others = [r for r in roles if r != role]
            total = np.zeros_like(change)
            for size in range(len(others) + 1):
                for combo in itertools.combinations(others, size):
                    without = frozenset(combo)
                    total = total + weights[size] * (table[without | {role}] - table[without])
            shares[role] = total
        solo = sum((table[frozenset({r})] - table[empty] for r in roles), np.zeros_like(change))
        interaction = change - solo
    else:
        for role in roles:
            shares[role] = table[full] - table[full - {role}]
        interaction = change - sum(shares.values(), np.zeros_like(change))
    return shares, change, interaction


def _interval(values: np.ndarray, draws: np.ndarray) -> Estimate:
    """The mean over problems and its paired-bootstrap interval (`draws`: resampled problem
    indices, one row per draw)."""
    means = values[draws].mean(axis=1)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Estimate(
        mean=float(values.mean()),
        low=float(low),
        high=float(high),
        n=len(values),
        method="bootstrap",
    )


def attribute(
    roles: Sequence[str],
    per_problem: Mapping[Coalition, Sequence[float]],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
) -> dict:
    """Split v(all) − v(none) among `roles` from each planned coalition's per-problem
    accuracies (`per_problem[coalition]`, the problems in the same order in every one).

    Returns {"method", "roles", "problems", "change": {"value", "low", "high"}, "shares":
    {role: {"value", "low", "high"}}, "interaction": {…}, "accuracy": {coalition key:
    accuracy}}: JSON, stored as it is (a swap job's result), each interval an `Estimate`
    written `Estimate.as_share` and read back with `Estimate.from_share`. Raises ValueError
    naming a missing coalition or a problem count that differs.
    """
    roles = list(roles)
    method = method_for(roles)
    wanted = plan_coalitions(roles)
    missing = [coalition_key(c, roles) for c in wanted if c not in per_problem]
    if missing:
        raise ValueError(f"missing the evaluation of coalition(s) {', '.join(missing)}")
    sizes = {len(per_problem[c]) for c in wanted}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(
            f"every evaluation needs the same problems; got problem counts {sorted(sizes)}"
        )
    (n,) = sizes
    table = {c: np.asarray(per_problem[c], dtype=float) for c in wanted}
    shares, change, interaction = _per_problem(roles, table, method)
    picks = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    return {
        "method": method,
        "roles": roles,
        "problems": n,
        "change": _interval(change, picks).as_share(),
        "shares": {role: _interval(values, picks).as_share() for role, values in shares.items()},
        "interaction": _interval(interaction, picks).as_share(),
        "accuracy": {coalition_key(c, roles): float(table[c].mean()) for c in wanted},
    }
