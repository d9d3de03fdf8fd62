"""The record of one rollout: an episode of turns, each with everything GRPO needs.

A workflow run on one problem produces an `Episode`: its ordered turns (role, agent, the
policy that generated it, prompt and completion token ids, sampling log-probs), the final
answer and the reward. Turns are plain data so the trainer, tests and benchmarks can build
them without a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Turn:
    role: str  # e.g. "generator"
    agent: str  # e.g. "generator1": one instance of a role
    policy: str  # the policy (adapter) that generated it, from the sharing routing
    stage: int  # index of the workflow stage; turns of one stage were generated together
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # sampling log-prob of each completion token, len == len(completion_ids)
    text: str = ""  # decoded completion
    score: float | None = None  # the role's own score where it can be judged (a voter's answer)
    reward: float = 0.0  # reward credited to this turn (broadcast or per-role)
    advantage: float = 0.0  # GRPO advantage, filled by the trainer
    truncated: bool = False  # hit max_new_tokens without an end-of-sequence token
    # Another engine sampled it (rollout_engine vllm): `logprobs` are then the trainer's own,
    # recomputed, and these the per-token truncated importance weights min(π_old/π_engine, cap)
    is_weights: list[float] | None = None


@dataclass
class Episode:
    problem_id: str
    sample: int  # rollout index within the problem's group
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None  # the workflow's final answer (text or code)
    reward: float = 0.0  # final-answer correctness, 0 or 1
    malformed: dict[str, int] = field(default_factory=dict)  # e.g. {"no_verdict": 1}
    # A sampled passing answer that an independent re-check failed (trainer/rollout.py)
    verdict_disagreement: bool = False

    def turns_of(self, role: str) -> list[Turn]:
        return [t for t in self.turns if t.role == role]
