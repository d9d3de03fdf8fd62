"""One run's §6 summary (`summarize_run`): its accuracy verdict, each role's amplification
onset and lead, and capture — from its series `{key: (steps, values)}` (docs/design.md §5).

A summary is stored, cached and served as the plain dict `summarize_run` returns (JSON, the
same bytes as ever). Code that reads one takes it as typed fields instead:
`RunSummary.of(summary)` — `None` (a run not summarised yet) included — gives
`summary.accuracy.cliff_onset`, `summary.lead`, … with the defaults of a run that has no
evaluation, where callers used to guard every level with `(x or {}).get(...)`. `as_dict()`
gives back the dict, keys in the same order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.amplification import AMPLIFICATION_DEFAULTS, TOO_FEW_STEPS, amplification_verdict
from analysis.capture import CAPTURE_DEFAULTS, capture_verdict
from analysis.cliffs import ACCURACY_DEFAULTS, UNJUDGED, cliff_label, summarize_accuracy
from analysis.series import align_by_step, names_between
from vocabulary.names import (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    GRAD_NORM,
    GRAD_SHARE,
    POLICY_PREFIX,
    SHARED,
    policy_key,
    role_key,
    roles_in,
)


@dataclass(frozen=True)
class AccuracySummary:
    """`summarize_accuracy`'s result as fields (its docstring says what each is); the
    defaults are those of a run with no evaluation."""

    base: float | None = None
    peak: float | None = None
    peak_step: int | float | None = None
    final: float | None = None
    gain: float | None = None
    final_gain: float | None = None
    cliff: bool = False
    cliff_onset: int | float | None = None
    cliff_status: str = "insufficient"
    theta: float | None = None
    threshold: float | None = None
    cliff_test: dict[str, Any] | None = None
    degradation_onset: int | float | None = None
    n_evals: int = 0
    first_step: int | float | None = None
    last_step: int | float | None = None
    running: bool = False
    evidence: str | None = None

    @classmethod
    def of(cls, accuracy: Mapping[str, Any] | None) -> AccuracySummary:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (accuracy or {}).items() if k in known})

    @property
    def judged(self) -> bool:
        """Whether there were enough evaluations for a verdict."""
        return self.cliff_status not in UNJUDGED

    @property
    def label(self) -> str:
        """The verdict in a few words, as every page shows it (`cliff_label`)."""
        return cliff_label(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class RunSummary:
    """`summarize_run`'s result as fields; `RunSummary.of(None)` is a run with no points."""

    accuracy: AccuracySummary = field(default_factory=AccuracySummary)
    roles: list[str] = field(default_factory=list)
    amplification: dict[str, Any] = field(default_factory=dict)  # role → onset step or None
    lead: dict[str, Any] = field(default_factory=dict)  # role → cliff_onset − onset, or None
    policy_amplification: dict[str, Any] = field(default_factory=dict)
    capture: str | None = None
    capture_fractions: dict[str, float] = field(default_factory=dict)
    # "captured", "none", "too_few_steps"; None where capture is no question (one role, or
    # per-role policies).
    capture_status: str | None = None
    # role → "amplified", "none" or "too_few_steps" (no baseline of real signal yet).
    amplification_status: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, summary: Mapping[str, Any] | None) -> RunSummary:
        summary = summary or {}
        return cls(
            accuracy=AccuracySummary.of(summary.get("accuracy")),
            roles=list(summary.get("roles") or ()),
            amplification=dict(summary.get("amplification") or {}),
            lead=dict(summary.get("lead") or {}),
            policy_amplification=dict(summary.get("policy_amplification") or {}),
            capture=summary.get("capture"),
            capture_fractions=dict(summary.get("capture_fractions") or {}),
            capture_status=summary.get("capture_status"),
            amplification_status=dict(summary.get("amplification_status") or {}),
        )

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["accuracy"] = self.accuracy.as_dict()
        return out


def split_thresholds(thresholds: dict[str, Any]) -> tuple[dict, dict, dict]:
    accuracy, amplification, capture_kw = {}, {}, {}
    for name, value in thresholds.items():
        if name in ACCURACY_DEFAULTS:
            accuracy[name] = value
        elif name in AMPLIFICATION_DEFAULTS:
            amplification[name] = value
        elif name.startswith("capture_") and name[8:] in CAPTURE_DEFAULTS:
            capture_kw[name[8:]] = value
        else:
            known = [*ACCURACY_DEFAULTS, *AMPLIFICATION_DEFAULTS]
            known += [f"capture_{k}" for k in CAPTURE_DEFAULTS]
            raise TypeError(f"unknown threshold {name!r}; known: {', '.join(known)}")
    return accuracy, amplification, capture_kw


def summarize_run(
    series: Mapping[str, tuple[Sequence, Sequence]],
    *,
    running: bool = False,
    sharing: str | None = None,
    per_problem: Mapping | None = None,
    total_steps: float | None = None,
    **thresholds: Any,
) -> dict[str, Any]:
    """§6 for one run, given `{key: (steps, values)}` (docs/design.md §5 metric names).

    The cliff test uses `eval/accuracy_se` when the run logged it, and `per_problem`
    ({step: per-problem accuracies}, from `eval_problems.jsonl`) when given. `total_steps`
    (the run's planned length) fixes the amplification baseline by step, as the radar does.

    Returns:
      `accuracy`: `summarize_accuracy` of `eval/accuracy` (all None when absent);
      `roles`: sorted roles found under `role/<role>/…`;
      `amplification`: {role: onset step or None} from `role/<role>/grad_norm`;
      `lead`: {role: cliff_onset − onset, or None when either is missing};
      `policy_amplification`: {policy: onset or None} from `policy/<p>/grad_norm`;
      `capture`: the capturing role or None, from `role/<role>/grad_share` — computed only
        when two or more roles put gradient on one policy: `sharing` "shared" or not given,
        and at least two roles with a share (a lone role, or per-role policies, trivially
        have share 1);
      `capture_fractions`: {role: fraction of last-half steps above the capture threshold},
        empty when capture is not computed or too few steps are logged;
      `capture_status`: "captured", "none", "too_few_steps" (fewer than `capture_min_steps`
        (10) logged steps), or None where capture is not computed;
      `amplification_status`: {role: "amplified", "none" or "too_few_steps"} (no baseline of
        `min_signal` points carrying signal yet).

    `thresholds` take the keyword names of `summarize_accuracy` (alpha, drop_frac, min_drop,
    median_window, final_window) and `amplification_onset` (baseline_frac, k_mad, consecutive,
    mad_floor, min_signal), and `capture_threshold` / `capture_majority` /
    `capture_min_steps` for `capture_verdict`.
    """
    acc_kw, amp_kw, cap_kw = split_thresholds(thresholds)
    accuracy = _accuracy_of(series, running, per_problem, acc_kw)
    roles = roles_in(series)  # every role/<role>/<metric> key names a role, whatever the metric
    amplification, amplification_status, lead = _amplification_of(
        series, roles, accuracy["cliff_onset"], total_steps, amp_kw
    )
    policy_amplification = {
        p: amplification_verdict(
            *series[policy_key(p, GRAD_NORM)], total_steps=total_steps, **amp_kw
        )["onset"]
        for p in names_between(series, POLICY_PREFIX, "/grad_norm")
    }
    captured, fractions, capture_status = _capture_of(series, roles, sharing, cap_kw)
    return {
        "accuracy": accuracy,
        "roles": roles,
        "amplification": amplification,
        "lead": lead,
        "policy_amplification": policy_amplification,
        "capture": captured,
        "capture_fractions": fractions,
        "capture_status": capture_status,
        "amplification_status": amplification_status,
    }


def _accuracy_of(
    series: Mapping[str, tuple[Sequence, Sequence]],
    running: bool,
    per_problem: Mapping | None,
    acc_kw: dict[str, Any],
) -> dict[str, Any]:
    """`summarize_accuracy` of the run's `eval/accuracy`, with its logged SE when it has one."""
    acc_steps, acc_values = series.get(ACCURACY_KEY, ((), ()))
    se = None
    if ACCURACY_SE_KEY in series:
        by_step = dict(zip(*series[ACCURACY_SE_KEY], strict=True))
        se = [by_step.get(x) for x in acc_steps]
    return summarize_accuracy(
        acc_steps, acc_values, se=se, per_problem=per_problem, running=running, **acc_kw
    )


def _amplification_of(
    series: Mapping[str, tuple[Sequence, Sequence]],
    roles: list[str],
    onset_cliff: float | None,
    total_steps: float | None,
    amp_kw: dict[str, Any],
) -> tuple[dict, dict, dict]:
    """({role: amplification onset or None}, {role: its status}, {role: the cliff onset's
    lead over it, or None})."""
    amplification: dict[str, Any] = {}
    amplification_status: dict[str, str] = {}
    lead: dict[str, Any] = {}
    for role in roles:
        key = role_key(role, GRAD_NORM)
        verdict = (
            amplification_verdict(*series[key], total_steps=total_steps, **amp_kw)
            if key in series
            else {"onset": None, "status": TOO_FEW_STEPS}
        )
        onset = verdict["onset"]
        amplification[role] = onset
        amplification_status[role] = verdict["status"]
        lead[role] = onset_cliff - onset if onset is not None and onset_cliff is not None else None
    return amplification, amplification_status, lead


def _capture_of(
    series: Mapping[str, tuple[Sequence, Sequence]],
    roles: list[str],
    sharing: str | None,
    cap_kw: dict[str, Any],
) -> tuple[str | None, dict, str | None]:
    """(the capturing role, the roles' fractions, the capture status) — (None, {}, None)
    unless two or more roles put gradient on one policy."""
    share_roles = [r for r in roles if role_key(r, GRAD_SHARE) in series]
    if sharing not in (None, SHARED) or len(share_roles) < 2:
        return None, {}, None
    steps, shares = align_by_step({r: series[role_key(r, GRAD_SHARE)] for r in share_roles})
    verdict = capture_verdict(steps, shares, **cap_kw)
    return verdict["role"], verdict["fractions"], verdict["status"]
