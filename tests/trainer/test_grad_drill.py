"""Gradient drill-down: each recorded episode's share of each role's gradient,
share_{e,r} = <g_{e,r}, g_r> / ‖g_r‖², equals the figure from separate backward passes, and
the shares of all a step's episodes sum to 1 per role.

The batch is test_gradients_exact's hand-made Voting step (2 problems × 2 samples, agents
generator0–2 and aggregator: 4 episodes of 4 turns) under every sharing mode; the expected
shares come from one backward pass per (episode, role, policy) and per (role, policy) on those
turns alone, with the policy's whole-batch normaliser, before the update moves the weights.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer import dist_ranks
from tests.trainer.test_gradients_exact import PAD, build, make_turns, separate_gradient
from trainer import grad_drill
from trainer.config import make_config
from trainer.distributed import SOLO, split_list
from trainer.episode import Episode
from trainer.grad_drill import EpisodeDrill, drilling
from trainer.update import batch_normalizer, update_policies


def config_for(sharing, **extra):
    return make_config(
        workflow="voting",
        sharing=sharing,
        lora_r=4,
        lora_alpha=8,
        lr=1e-2,
        warmup_steps=0,
        max_new_tokens=8,
        temperature=0.7,
        **extra,
    )


def episodes_of(turns) -> list[Episode]:
    return [
        Episode(problem_id=f"p{i // 8}", sample=(i // 4) % 2, turns=turns[i : i + 4])
        for i in range(0, len(turns), 4)
    ]


def expected_shares(policies, episodes, config) -> list[dict[str, float]]:
    turns = [t for ep in episodes for t in ep.turns]
    numerator: dict[tuple[int, str], float] = {}
    norm_sq: dict[str, float] = {}
    for name in policies.names:
        mine = [t for t in turns if t.policy == name]
        normalizer = batch_normalizer(mine, config)
        for role in sorted({t.role for t in mine}):
            total = separate_gradient(
                policies, name, [t for t in mine if t.role == role], normalizer, config
            ).double()
            norm_sq[role] = norm_sq.get(role, 0.0) + float(total @ total)
            for e, ep in enumerate(episodes):
                part = [t for t in ep.turns if t.policy == name and t.role == role]
                if part:
                    g = separate_gradient(policies, name, part, normalizer, config).double()
                    numerator[(e, role)] = numerator.get((e, role), 0.0) + float(g @ total)
    out = [{} for _ in episodes]
    for (e, role), value in numerator.items():
        out[e][role] = value / norm_sq[role]
    return out


@pytest.mark.parametrize("micro_batch_size", [2, 16])
@pytest.mark.parametrize("sharing", ["shared", "per_role", "per_agent"])
def test_shares_equal_separate_backward_passes_and_sum_to_one(sharing, micro_batch_size):
    config = config_for(sharing, micro_batch_size=micro_batch_size)
    policies = build(config)
    episodes = episodes_of(make_turns(config, policies))
    expected = expected_shares(policies, episodes, config)

    drill = EpisodeDrill(episodes)
    with drilling(drill):
        update_policies(
            policies, [t for ep in episodes for t in ep.turns], config, tokenizer_pad_id=PAD
        )
    shares = drill.shares()

    assert [set(s) for s in shares] == [{"generator", "aggregator"}] * 4
    for got, want in zip(shares, expected, strict=True):
        for role in want:
            assert got[role] == pytest.approx(want[role], rel=1e-4, abs=1e-6), role
    for role in ("generator", "aggregator"):
        assert sum(s[role] for s in shares) == pytest.approx(1.0, abs=1e-5)


def test_a_recorded_sample_gets_the_same_shares_and_the_update_is_unchanged():
    config = config_for("shared", micro_batch_size=3)
    policies = build(config)
    turns = make_turns(config, policies)
    episodes = episodes_of(turns)
    expected = expected_shares(policies, episodes, config)[1:3]

    drill = EpisodeDrill(episodes[1:3])  # two of the four: a sample, as the trainer records
    with drilling(drill):
        update_policies(policies, turns, config, tokenizer_pad_id=PAD)
    plain = build(config)
    update_policies(plain, make_turns(config, plain), config, tokenizer_pad_id=PAD)

    for got, want in zip(drill.shares(), expected, strict=True):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    for p, q in zip(policies.parameters("shared"), plain.parameters("shared"), strict=True):
        assert torch.allclose(p, q, atol=1e-6)  # micro-batches differ: equal up to rounding


def test_mini_batches_sum_over_optimizer_steps_and_still_sum_to_one():
    # Each share is Σ_k <g_e,k, g_k> / Σ_k ‖g_k‖² over the step's optimizer steps k.
    config = config_for("per_agent", micro_batch_size=2, mini_batches=2)
    policies = build(config)
    episodes = episodes_of(make_turns(config, policies))
    drill = EpisodeDrill(episodes)
    with drilling(drill):
        update_policies(
            policies, [t for ep in episodes for t in ep.turns], config, tokenizer_pad_id=PAD
        )
    for role in ("generator", "aggregator"):
        assert sum(s[role] for s in drill.shares()) == pytest.approx(1.0, abs=1e-5)


def test_no_drill_active_changes_nothing():
    config = config_for("shared", micro_batch_size=2)
    a, b = build(config), build(config)
    with drilling(None):
        update_policies(a, make_turns(config, a), config, tokenizer_pad_id=PAD)
    update_policies(b, make_turns(config, b), config, tokenizer_pad_id=PAD)
    for p, q in zip(a.parameters("shared"), b.parameters("shared"), strict=True):
        assert torch.equal(p, q)


def _rank_episodes(config, world) -> list[Episode]:
    """This rank's share of dist_ranks' problems, one episode per (problem, sample)."""
    episodes = []
    for problem, turns in enumerate(split_list(dist_ranks.problem_turns(config, 1), world)):
        per_sample = len(turns) // dist_ranks.SAMPLES
        for s in range(dist_ranks.SAMPLES):
            part = turns[s * per_sample : (s + 1) * per_sample]
            episodes.append(Episode(problem_id=f"p{problem}", sample=s, turns=part))
    return episodes


def _drill_on_every_rank(world, sharing):
    config = dist_ranks.step_config(sharing, "lora")
    policies = dist_ranks.build(config)
    episodes = _rank_episodes(config, world)
    drill = EpisodeDrill(episodes)
    with drilling(drill):
        update_policies(
            policies,
            [t for ep in episodes for t in ep.turns],
            config,
            tokenizer_pad_id=dist_ranks.PAD,
            world=world,
        )
    return drill.shares()


@pytest.mark.slow
@pytest.mark.parametrize("sharing", ["shared", "per_agent"])
def test_two_ranks_give_each_ranks_episodes_the_shares_of_one_process(sharing):
    # Each rank's drill sees only its own episodes' parts; the role totals it divides by are
    # summed over ranks, so rank 0 then rank 1 equal one process over all the episodes.
    results = dist_ranks.launch(_drill_on_every_rank, 2, sharing)
    for rank, (status, value) in enumerate(results):
        assert status == "ok", f"rank {rank}: {value}"
    one = _drill_on_every_rank(SOLO, sharing)
    both = results[0][1] + results[1][1]
    assert len(both) == len(one) == 6
    for got, want in zip(both, one, strict=True):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    for role in ("generator", "aggregator"):
        assert sum(s.get(role, 0.0) for s in both) == pytest.approx(1.0, abs=1e-5)


def test_the_micro_batch_count_is_what_the_segment_yields():
    config = config_for("shared")
    policies = build(config)
    episodes = episodes_of(make_turns(config, policies))
    segment = [t for ep in episodes for t in ep.turns if t.agent == "generator0"]
    params = policies.parameters("shared")
    for drill in (None, EpisodeDrill(episodes[:3])):
        with drilling(drill):
            for size in (1, 2, 3):
                groups = grad_drill.groups("shared", "generator", segment, params)
                batches = [c for g in groups for c in grad_drill.chunks(g, size)]
                assert grad_drill.micro_batch_count(segment, size) == len(batches)
                assert sorted(map(id, (t for b in batches for t in b))) == sorted(map(id, segment))
