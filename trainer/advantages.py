"""Credit assignment: which reward each turn gets, and its GRPO advantage.

`assign_rewards` implements `reward_mode` (DESIGN.md §3): `broadcast` gives every turn the
episode's final reward (the paper); `per_role` gives a turn its own `score` where the workflow
could judge it (a voter's answer) and the episode reward otherwise.

`compute_advantages` groups turns by (problem, role) — the paper — or (problem, agent), over
all rollouts of the problem. Every turn is a member of its group, so an episode with several
turns of one role (Eval-Opt rounds) puts all of them in; advantage = (r − mean) / (std + 1e-4).
The std is the unbiased one (Bessel's correction), as TRL's `nanstd`, so with the same rewards
our advantages equal TRL's. A group of one has no spread: its std is taken as 0 (advantage 0).
"""

from __future__ import annotations

import math
from collections import defaultdict

from trainer.config import Config
from trainer.episode import Episode, Turn

EPS = 1e-4  # TRL's: keeps zero-std groups finite (their advantages are 0 anyway)
ZERO_STD = 1e-8  # TRL's torch.isclose(std, 0) tolerance for counting zero-std groups


def assign_rewards(episodes: list[Episode], config: Config) -> None:
    """Fill `turn.reward` for every turn according to `config.reward_mode`."""
    for episode in episodes:
        for turn in episode.turns:
            if config.reward_mode == "per_role" and turn.score is not None:
                turn.reward = float(turn.score)
            else:
                turn.reward = float(episode.reward)


def group_key(episode: Episode, turn: Turn, config: Config) -> tuple[str, str]:
    member = turn.agent if config.group_key == "problem_agent" else turn.role
    return (episode.problem_id, member)


def compute_advantages(episodes: list[Episode], config: Config) -> dict[str, float]:
    """Assign rewards, then write each turn's GRPO advantage into `turn.advantage`.

    Returns step statistics: train/reward (mean episode reward), train/reward_std (mean
    within-group reward std, as TRL logs it), train/frac_zero_std (fraction of groups whose
    rewards are all equal: they carry no policy gradient), train/groups.
    """
    assign_rewards(episodes, config)
    groups: dict[tuple[str, str], list[Turn]] = defaultdict(list)
    for episode in episodes:
        for turn in episode.turns:
            groups[group_key(episode, turn, config)].append(turn)

    stds = []
    for members in groups.values():
        rewards = [t.reward for t in members]
        n = len(rewards)
        mean = sum(rewards) / n
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1)) if n > 1 else 0.0
        for turn in members:
            # Exactly 0 for equal rewards, not the rounding residue of r - mean.
            turn.advantage = (turn.reward - mean) / (std + EPS) if std > ZERO_STD else 0.0
        stds.append(std)

    stats = {
        "train/reward": sum(e.reward for e in episodes) / len(episodes) if episodes else 0.0,
        "train/groups": float(len(groups)),
    }
    if stds:
        stats["train/reward_std"] = sum(stds) / len(stds)
        stats["train/frac_zero_std"] = sum(s <= ZERO_STD for s in stds) / len(stds)
    return stats
