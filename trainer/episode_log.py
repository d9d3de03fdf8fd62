"""Recording episodes: which of a step's rollouts are kept, and as what plain record.

Every training step keeps the whole GRPO group of its first `episodes_per_step` problems
(the step's problems are a random draw, so the first ones are a random sample); every
evaluation keeps all `eval_samples` episodes of the first `episodes_probe` held-out
problems — the same problems at every evaluation, so a problem can be followed from the base
model through the peak to the cliff. The records go to the reporter's `log_episodes`
(`trainer/reporting.py`); the workers store them compressed, one row per episode
(`webapp/episodes/`).

A record is plain JSON: per episode its `index` in the step's rollout batch (with `kind` and
`step`, the key that makes a replayed write harmless: problem ids repeat when a split is
drawn with replacement), problem id, sample, final answer and verifier outcome; per turn the
role, agent, policy, stage, prompt and completion text, token counts, mean sampling
log-prob, reward, advantage, the role's own score and whether it was truncated. Texts are
made safe to store and show (lone surrogates and NUL replaced) and cut at `MAX_TEXT_CHARS`.
Token entropy is not recorded: the sampler keeps only the chosen tokens' log-probs.
A training episode's record also has `grad_share`: {role: its share of that role's gradient at
the step} (trainer/grad_drill.py; they sum to 1 over all the step's episodes, not only the
recorded ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from trainer.config import Config
from trainer.episode import Episode

MAX_TEXT_CHARS = 32_000  # per prompt or completion: a paper aggregator prompt is ~25k chars

Decode = Callable[[list[int]], str]


def safe_text(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """`text` storable as UTF-8 and in PostgreSQL/HTML (no lone surrogates, no NUL), cut at
    `limit` characters with a note saying how many were left out."""
    if text is None:
        return None
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    if len(text) > limit:
        text = text[:limit] + f"\n… [{len(text) - limit} more characters not recorded]"
    return text


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None  # JSON has no NaN


def episode_record(ep: Episode, *, index: int, kind: str, step: int, decode: Decode) -> dict:
    turns = []
    for turn in ep.turns:
        mean_logprob = sum(turn.logprobs) / len(turn.logprobs) if turn.logprobs else None
        turns.append(
            {
                "role": turn.role,
                "agent": turn.agent,
                "policy": turn.policy,
                "stage": turn.stage,
                "prompt": safe_text(decode(turn.prompt_ids)),
                "completion": safe_text(turn.text),
                "prompt_tokens": len(turn.prompt_ids),
                "completion_tokens": len(turn.completion_ids),
                "logprob_mean": None if mean_logprob is None else _number(mean_logprob),
                "reward": _number(turn.reward),
                "advantage": _number(turn.advantage),
                "score": None if turn.score is None else _number(turn.score),
                "truncated": bool(turn.truncated),
            }
        )
    return {
        "kind": kind,
        "step": step,
        "index": index,
        "problem_id": ep.problem_id,
        "sample": ep.sample,
        "answer": safe_text(ep.answer),
        "reward": _number(ep.reward),
        "correct": ep.reward > 0.5,
        "malformed": dict(ep.malformed),
        "turns": turns,
        **({"verdict_disagreement": True} if ep.verdict_disagreement else {}),
    }


def train_sample(config: Config, episodes: Sequence[Episode]) -> Sequence[Episode]:
    """The step's episodes to keep: the whole groups of its first `episodes_per_step`
    problems (the rollout returns each problem's `group_size` samples together)."""
    return episodes[: config.episodes_per_step * config.group_size]


def flagged_beyond(recorded: Sequence[Episode], episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes outside the recorded sample whose passing answer an independent re-check
    failed (trainer/rollout.py): recorded too, so the episode view shows every one."""
    kept = {id(ep) for ep in recorded}
    return [ep for ep in episodes if ep.verdict_disagreement and id(ep) not in kept]


def probe_sample(config: Config, episodes: Sequence[Episode]) -> Sequence[Episode]:
    """An evaluation's episodes to keep: every sample of the first `episodes_probe` held-out
    problems (evaluation returns each problem's `eval_samples` samples together, in order)."""
    return episodes[: config.episodes_probe * config.eval_samples]


def log_episodes(
    reporter: Any,
    kind: str,
    step: int,
    episodes: Sequence[Episode],
    decode: Decode,
    *,
    grad_shares: Sequence[dict[str, float]] | None = None,
) -> int:
    """Hand the records of `episodes` to the reporter; how many. A reporter written before
    episodes existed (without `log_episodes`) is skipped, not broken. `grad_shares` (one
    {role: share} per episode, trainer/grad_drill.py) becomes each record's `grad_share`."""
    send = getattr(reporter, "log_episodes", None)
    if send is None or not episodes:
        return 0
    if grad_shares is not None and len(grad_shares) != len(episodes):
        raise ValueError(f"{len(grad_shares)} gradient shares for {len(episodes)} episodes")
    records = [
        episode_record(ep, index=i, kind=kind, step=step, decode=decode)
        for i, ep in enumerate(episodes)
    ]
    for record, shares in zip(records, grad_shares or [], strict=False):
        record["grad_share"] = {role: _number(value) for role, value in shares.items()}
    send(step, records)
    return len(records)
