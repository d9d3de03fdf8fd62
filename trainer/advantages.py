"""Credit assignment: which reward each turn gets, and its GRPO advantage.

`assign_rewards` implements `reward_mode` (docs/design.md §3): `broadcast` gives every turn the
episode's final reward (the paper); `per_role` gives a turn its own `score` where the workflow
could judge it (a voter's answer) and the episode reward otherwise.

`compute_advantages` groups turns by (problem, role) — the paper — or (problem, agent), over
all rollouts of the problem. Every turn is a member of its group, so an episode with several
turns of one role (Eval-Opt rounds) puts all of them in; advantage = (r − mean) / (std + 1e-4).
The std is the unbiased one (Bessel's correction), as TRL's `nanstd`, so with the same rewards
our advantages equal TRL's. A group of one has no spread: its std is taken as 0 (advantage 0).

`reward_stats` is the one definition of the step's reward statistics (the training loop logs
what it returns): `train/reward` and `train/reward_std` are the mean and the unbiased std of
the step's episode rewards, as TRL logs `reward` and `reward_std` over a batch of completions
(an episode is our completion); how many groups carry no signal is `train/frac_zero_std`.
"""

from __future__ import annotations

import math
from collections import defaultdict

from trainer.config import Config
from trainer.episode import Episode, Turn
from vocabulary.names import (
    GROUPS_KEY,
    REWARD_KEY,
    REWARD_PER_ROLE,
    REWARD_STD_KEY,
    ZERO_STD_KEY,
)

EPS = 1e-4  # TRL's: keeps zero-std groups finite (their advantages are 0 anyway)
ZERO_STD = 1e-8  # TRL's torch.isclose(std, 0) tolerance for counting zero-std groups


def assign_rewards(episodes: list[Episode], config: Config) -> None:
    """Fill `turn.reward` for every turn according to `config.reward_mode`."""
    for episode in episodes:
        for turn in episode.turns:
            if config.reward_mode == REWARD_PER_ROLE and turn.score is not None:
                turn.reward = float(turn.score)
            else:
                turn.reward = float(episode.reward)


def group_key(episode: Episode, turn: Turn, config: Config) -> tuple[str, str]:
    member = turn.agent if config.group_key == "problem_agent" else turn.role
    return (episode.problem_id, member)


def _std(values: list[float]) -> float:
    """The unbiased (Bessel) std, as TRL's `nanstd`; 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def reward_stats(episodes: list[Episode]) -> dict[str, float]:
    """train/reward and train/reward_std: mean and unbiased std of the episode rewards."""
    rewards = [float(e.reward) for e in episodes]
    return {
        REWARD_KEY: sum(rewards) / len(rewards) if rewards else 0.0,
        REWARD_STD_KEY: _std(rewards),
    }


def compute_advantages(episodes: list[Episode], config: Config) -> dict[str, float]:
    """Assign rewards, then write each turn's GRPO advantage into `turn.advantage`.

    Returns step statistics: those of `reward_stats`, train/frac_zero_std (fraction of
    (problem, role) groups whose rewards are all equal: they carry no policy gradient) and
    train/groups.
    """
    assign_rewards(episodes, config)
    groups: dict[tuple[str, str], list[Turn]] = defaultdict(list)
    for episode in episodes:
        for turn in episode.turns:
            groups[group_key(episode, turn, config)].append(turn)

    stds = []
    for members in groups.values():
        rewards = [t.reward for t in members]
        mean = sum(rewards) / len(rewards)
        std = _std(rewards)
        for turn in members:
            # Exactly 0 for equal rewards, not the rounding residue of r - mean.
            turn.advantage = (turn.reward - mean) / (std + EPS) if std > ZERO_STD else 0.0
        stds.append(std)

    stats = {**reward_stats(episodes), GROUPS_KEY: float(len(groups))}
    if stds:
        stats[ZERO_STD_KEY] = sum(s <= ZERO_STD for s in stds) / len(stds)
    return stats
