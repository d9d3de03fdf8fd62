"""Credit assignment: reward modes, GRPO group keys, zero-std groups, agreement with TRL."""

from __future__ import annotations

import math

import pytest
import torch
from trl.trainer.utils import nanstd

from trainer.advantages import EPS, assign_rewards, compute_advantages, reward_stats
from trainer.config import make_config
from trainer.episode import Episode, Turn


def turn(role: str, agent: str, score: float | None = None) -> Turn:
    return Turn(role, agent, "shared", 0, [1], [2], [-0.5], score=score)


def voting_episode(problem: str, sample: int, reward: float, scores=(None, None, None)) -> Episode:
    turns = [turn("generator", f"generator{i}", s) for i, s in enumerate(scores)]
    return Episode(problem, sample, turns + [turn("aggregator", "aggregator")], reward=reward)


def test_broadcast_gives_every_turn_the_episode_reward():
    episodes = [voting_episode("p", 0, 1.0, scores=(0.0, 1.0, None))]
    assign_rewards(episodes, make_config(workflow="voting", reward_mode="broadcast"))
    assert [t.reward for t in episodes[0].turns] == [1.0, 1.0, 1.0, 1.0]


def test_per_role_uses_a_turns_own_score_where_there_is_one():
    episodes = [voting_episode("p", 0, 1.0, scores=(0.0, 1.0, None))]
    assign_rewards(episodes, make_config(workflow="voting", reward_mode="per_role"))
    assert [t.reward for t in episodes[0].turns] == [0.0, 1.0, 1.0, 1.0]


def test_problem_role_groups_pool_all_agents_of_a_role_across_rollouts():
    config = make_config(workflow="voting", reward_mode="per_role", group_key="problem_role")
    episodes = [
        voting_episode("p", 0, 1.0, scores=(1.0, 0.0, 0.0)),
        voting_episode("p", 1, 0.0, scores=(0.0, 0.0, 0.0)),
    ]
    stats = compute_advantages(episodes, config)
    # generator group: six members, one of them right
    rewards = torch.tensor([1.0, 0, 0, 0, 0, 0])
    expected = (rewards - rewards.mean()) / (nanstd(rewards) + EPS)
    got = [t.advantage for e in episodes for t in e.turns_of("generator")]
    assert got == pytest.approx(expected.tolist(), rel=1e-6)
    aggregator = [t.advantage for e in episodes for t in e.turns_of("aggregator")]
    assert aggregator[0] > 0 > aggregator[1]
    assert stats["train/groups"] == 2 and stats["train/frac_zero_std"] == 0.0


def test_problem_agent_groups_each_agent_separately():
    config = make_config(workflow="voting", reward_mode="per_role", group_key="problem_agent")
    episodes = [
        voting_episode("p", 0, 1.0, scores=(1.0, 0.0, 1.0)),
        voting_episode("p", 1, 1.0, scores=(0.0, 0.0, 1.0)),
    ]
    stats = compute_advantages(episodes, config)
    adv = {(e.sample, t.agent): t.advantage for e in episodes for t in e.turns}
    assert adv[(0, "generator0")] > 0 > adv[(1, "generator0")]
    # generator1, generator2 and the aggregator each got equal rewards in both rollouts
    for agent in ("generator1", "generator2", "aggregator"):
        assert adv[(0, agent)] == adv[(1, agent)] == 0.0
    assert stats["train/groups"] == 4
    assert stats["train/frac_zero_std"] == pytest.approx(3 / 4)


def test_several_turns_of_one_role_in_an_episode_are_all_members():
    config = make_config(workflow="eval_opt", reward_mode="per_role")
    rounds = [turn("generator", "generator", s) for s in (0.0, 0.0, 1.0)]
    episodes = [
        Episode("p", 0, rounds, reward=1.0),
        Episode("p", 1, [turn("generator", "generator", 0.0)], reward=0.0),
    ]
    compute_advantages(episodes, config)
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0])
    expected = (rewards - rewards.mean()) / (nanstd(rewards) + EPS)
    got = [t.advantage for e in episodes for t in e.turns]
    assert got == pytest.approx(expected.tolist(), rel=1e-6)


def test_zero_std_groups_get_exactly_zero_advantage():
    config = make_config(workflow="voting")
    episodes = [voting_episode("p", s, 0.1) for s in range(3)]
    episodes += [voting_episode("q", 0, 0.0), voting_episode("q", 1, 1.0)]
    stats = compute_advantages(episodes, config)
    assert all(t.advantage == 0.0 for e in episodes[:3] for t in e.turns)
    assert all(t.advantage != 0.0 for e in episodes[3:] for t in e.turns)
    assert stats["train/frac_zero_std"] == pytest.approx(2 / 4)
    assert stats["train/reward"] == pytest.approx((0.3 + 1.0) / 5)


def test_a_group_of_one_has_no_advantage():
    config = make_config(workflow="orch_workers", group_key="problem_agent")
    episodes = [
        Episode("p", 0, [turn("worker", "worker0"), turn("worker", "worker1")], reward=1.0),
        Episode("p", 1, [turn("worker", "worker0")], reward=0.0),
    ]
    compute_advantages(episodes, config)
    assert episodes[0].turns[1].advantage == 0.0
    assert episodes[0].turns[0].advantage > 0 > episodes[1].turns[0].advantage


def test_reward_std_is_the_unbiased_std_of_the_steps_episode_rewards():
    # Two problems whose groups differ in spread, so that the other plausible definitions give
    # other numbers: the mean within-group std (0.6422) and the population std (0.4899).
    rewards = {("p", 0): 1.0, ("p", 1): 0.0, ("q", 0): 0.0, ("q", 1): 1.0, ("q", 2): 1.0}
    episodes = [voting_episode(p, s, r) for (p, s), r in rewards.items()]
    stats = compute_advantages(episodes, make_config(workflow="voting"))
    assert stats["train/reward"] == pytest.approx(0.6)
    assert stats["train/reward_std"] == pytest.approx(math.sqrt(0.3), rel=1e-12)
    # TRL logs reward_std as nanstd over the batch's rewards: the same number.
    trl = nanstd(torch.tensor(list(rewards.values()), dtype=torch.float64)).item()
    assert stats["train/reward_std"] == pytest.approx(trl, rel=1e-12)
    assert reward_stats(episodes) == {k: stats[k] for k in ("train/reward", "train/reward_std")}


def test_one_episode_has_no_reward_spread():
    assert reward_stats([voting_episode("p", 0, 1.0)]) == {
        "train/reward": 1.0,
        "train/reward_std": 0.0,
    }
