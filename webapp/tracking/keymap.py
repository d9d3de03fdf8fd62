"""Other frameworks' metric keys, mapped onto Troupe's (docs/design.md §5).

Runs logged by verl / rLLM (the study's own fork), MARTI, TRL or the Hugging Face Trainer use
their own key conventions. Troupe's pages read its own names (`role/<role>/grad_norm`,
`eval/accuracy`, `train/loss` …), so at ingestion each recognised key is also stored under its
Troupe name, and the original key is kept as it was logged. Both the MLflow endpoint
(`webapp/tracking`) and the offline importer (`manage.py import_runs`) map through this module,
which builds Troupe's names with the vocabulary (`vocabulary/names.py`); only ingestion uses it,
so it lives in the web app.

The conventions:

- the study's fork of verl: `actor/<role>/<metric>` → `role/<role>/<metric>` for the per-role
  metrics (`grad_norm`, `kl`/`kl_loss`, `pg_loss`, `pg_clipfrac` → `clip_frac`, `entropy`);
- MARTI: `train/agent_<i>/<metric>` → `agent/agent<i>/<metric>` (Troupe names agents as role
  plus index, `generator0`);
- single-policy verl: `actor/pg_loss`, `actor/kl_loss`, `actor/pg_clipfrac`, `actor/entropy`,
  `critic/score/mean`, `response_length/mean` → `train/…`;
- TRL / the Hugging Face Trainer: `loss`, `reward`, `reward_std`, `kl`, `entropy`,
  `frac_reward_zero_std`, `completions/mean_length`, `clip_ratio/region_mean` → `train/…`;
- a validation accuracy → `eval/accuracy`: the key the user names, or else the first that looks
  like held-out pass@1 (see `accuracy_source`). verl's MLflow logger spells `@` as `_at_`
  (MLflow refuses `@`), so `val-core/math/acc/mean@1` arrives as `…/mean_at_1`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vocabulary.names import (
    ACCURACY_KEY,
    CLIP_FRAC,
    CLIP_FRAC_KEY,
    ENTROPY,
    ENTROPY_KEY,
    GRAD_NORM,
    KL,
    KL_KEY,
    LOSS_KEY,
    PG_LOSS,
    RESP_LEN,
    RESP_LEN_KEY,
    REWARD_KEY,
    REWARD_STD_KEY,
    ZERO_STD_KEY,
    agent_key,
    role_key,
)
from webapp.experiments.models import METRIC_KEY_MAX

MAX_KEY_LENGTH = METRIC_KEY_MAX  # Troupe's metric key column: MLflow's 250

# Per-role (and per-agent) metric names as verl / OpenRLHF spell them → docs/design.md §5's.
_ROLE_METRICS = {
    "grad_norm": GRAD_NORM,
    "kl": KL,
    "kl_loss": KL,
    "pg_loss": PG_LOSS,
    "policy_loss": PG_LOSS,
    "pg_clipfrac": CLIP_FRAC,
    "clip_frac": CLIP_FRAC,
    "entropy": ENTROPY,
    "response_length": RESP_LEN,
}
_ROLE = re.compile(r"^actor/(?P<role>[A-Za-z][\w.\-]*)/(?P<metric>[\w]+)$")
_MARTI_AGENT = re.compile(r"^train/agent_(?P<index>\d+)/(?P<metric>[\w]+)$")

# Whole keys with one fixed Troupe name.
_EXACT = {
    # verl, one policy
    "actor/pg_loss": LOSS_KEY,
    "actor/kl_loss": KL_KEY,
    "actor/pg_clipfrac": CLIP_FRAC_KEY,
    "actor/entropy": ENTROPY_KEY,
    "critic/score/mean": REWARD_KEY,
    "response_length/mean": RESP_LEN_KEY,
    # TRL's GRPOTrainer and the Hugging Face Trainer
    "loss": LOSS_KEY,
    "reward": REWARD_KEY,
    "reward_std": REWARD_STD_KEY,
    "kl": KL_KEY,
    "entropy": ENTROPY_KEY,
    "frac_reward_zero_std": ZERO_STD_KEY,
    "completions/mean_length": RESP_LEN_KEY,
    "clip_ratio/region_mean": CLIP_FRAC_KEY,
}

# Keys that look like held-out pass@1, best first: rLLM's `val/<source>/pass@1`, verl's
# `val-core/<source>/acc/mean@1` (then its reward mean, which is the accuracy under a 0/1
# reward), and an older verl's `val/test_score/<source>`.
_ACCURACY_PATTERNS = [
    re.compile(r"^val[\w\-]*/(.+/)?pass(@|_at_)1$"),
    re.compile(r"^val[\w\-]*/(.+/)?acc(uracy)?/mean(@|_at_)1$"),
    re.compile(r"^val[\w\-]*/(.+/)?acc(uracy)?$"),
    re.compile(r"^val[\w\-]*/(.+/)?reward/mean(@|_at_)1$"),
    re.compile(r"^val[\w\-]*/test_score(/.+)?$"),
]


def troupe_key(key: str) -> str | None:
    """Troupe's name for `key`, or None when `key` is already Troupe's or not recognised.
    (The accuracy key is chosen per run: see `accuracy_source`.)"""
    mapped = _EXACT.get(key)
    if mapped is None and (found := _ROLE.match(key)):
        metric = _ROLE_METRICS.get(found["metric"])
        mapped = metric and role_key(found["role"], metric)
    if mapped is None and (found := _MARTI_AGENT.match(key)):
        metric = _ROLE_METRICS.get(found["metric"], found["metric"])
        mapped = agent_key(f"agent{found['index']}", metric)
    if mapped is None or mapped == key or len(mapped) > MAX_KEY_LENGTH:
        return None
    return mapped


def accuracy_source(keys: Iterable[str], named: str | None = None) -> str | None:
    """The key whose values are the run's `eval/accuracy`: `named` when the user named one
    and it is among `keys`; None when the run logs `eval/accuracy` itself; else the best
    pass@1-like key (by pattern, then alphabetically), or None when there is none."""
    keys = set(keys)
    if named:
        return named if named in keys and named != ACCURACY_KEY else None
    if ACCURACY_KEY in keys:
        return None
    for pattern in _ACCURACY_PATTERNS:
        if found := sorted(key for key in keys if pattern.match(key)):
            return found[0]
    return None


def mappings(keys: Iterable[str], accuracy_key: str | None = None) -> dict[str, str]:
    """{original key: Troupe key} for the recognised keys among `keys`; `accuracy_key` (from
    `accuracy_source`) maps to `eval/accuracy`."""
    out: dict[str, str] = {}
    for key in dict.fromkeys(keys):
        mapped = ACCURACY_KEY if key == accuracy_key else troupe_key(key)
        if mapped is not None:
            out[key] = mapped
    return out


def aliases(
    keys: Iterable[str], accuracy_key: str | None = None, own: Iterable[str] = ()
) -> dict[str, str]:
    """`mappings` less those onto a Troupe key the client logs itself: one among `keys`, or
    in `own` (logged in another batch). A run that logs both `loss` and `train/loss` keeps
    the `train/loss` it logged."""
    keys = list(dict.fromkeys(keys))
    logged = {*keys, *own}
    return {k: t for k, t in mappings(keys, accuracy_key).items() if t not in logged}


def map_points(
    points: Iterable[tuple[str, int, float | None]],
    accuracy_key: str | None = None,
    own: Iterable[str] = (),
) -> list[tuple[str, int, float | None]]:
    """The points with each recognised one also under its Troupe key (originals first),
    except onto the keys the client logs itself (`aliases`)."""
    points = list(points)
    alias = aliases((key for key, _, _ in points), accuracy_key, own)
    extra = [(alias[key], step, value) for key, step, value in points if key in alias]
    return points + extra
