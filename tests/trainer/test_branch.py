"""Branched runs (`init_from`): a run that starts from another run's checkpoint on tiny-s."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.trainer import quick
from trainer.checkpoint_index import list_checkpoints, resume_point
from trainer.config import ConfigError
from trainer.reporting import ListReporter
from trainer.train import train


def small(**overrides):
    return quick.small(**{"workflow": "voting", "sharing": "per_role", **overrides})


def _comparable(points, first_step):
    """Points from `first_step` on, without timings and the best-checkpoint bookkeeping (a
    branch's best starts at its branch point)."""
    return sorted(
        (s, k, round(v, 6))
        for s, k, v in points
        if s >= first_step and not k.startswith(("sys/", "ckpt/"))
    )


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    out = tmp_path_factory.mktemp("parent")
    reporter = ListReporter()
    assert train(small(), out, reporter)["status"] == "succeeded"
    return out, reporter


def test_a_control_continuation_follows_the_parents_path(parent, tmp_path):
    out, logged = parent
    start = out / "checkpoints" / "step-000002"
    before = list_checkpoints(out)
    # checkpoint_every only says when to save: the branch stops after step 3, then resumes
    # from its own checkpoint, not from the parent's
    config = small(init_from=str(start), checkpoint_every=1)
    first = ListReporter(stop_after=3)
    assert train(config, tmp_path, first)["status"] == "cancelled"
    assert resume_point(tmp_path, config.init_from).path == tmp_path / "checkpoints" / "step-000003"
    second = ListReporter()
    assert train(config, tmp_path, second)["status"] == "succeeded"

    assert sorted({s for s, _, _ in first.points}) == [2, 3]  # evaluated at the branch point
    assert {k for s, k, _ in first.points if s == 2} >= {"eval/accuracy", "ckpt/best_step"}
    assert not any(k.startswith("train/") for s, k, _ in first.points if s == 2)
    assert min(s for s, _, _ in second.points) == 4
    parent_points = [
        p for p in logged.points if p[0] > 2 or (p[0] == 2 and p[1].startswith("eval/"))
    ]
    assert _comparable(first.points + second.points, 2) == _comparable(parent_points, 2)
    assert list_checkpoints(out) == before  # the parent's directory is left as it was
    assert {r.path.parent.parent for r in list_checkpoints(tmp_path)} == {tmp_path}


def test_a_branch_uses_its_own_learning_rate_from_its_first_step(parent, tmp_path):
    out, logged = parent
    config = small(init_from=str(out / "checkpoints" / "step-000002"), lr=1e-2, kl_beta=0.05)
    reporter = ListReporter()
    assert train(config, tmp_path, reporter)["status"] == "succeeded"
    steps, _ = reporter.series("eval/accuracy")
    assert steps == [2, 4]
    ours = dict(zip(*reporter.series("policy/generator/lr")))
    theirs = dict(zip(*logged.series("policy/generator/lr")))
    assert ours[3] == pytest.approx(theirs[3] * 1e-2 / 3e-3)


def test_a_branch_from_the_last_steps_checkpoint_trains_the_steps_it_adds(parent, tmp_path):
    # What the web's branching does when the peak is the parent's last step: the child's
    # steps go past the branch point (webapp/branching/branch.py, child_steps).
    out, _ = parent
    last = out / "checkpoints" / "step-000004"  # the parent's steps are 4
    reporter = ListReporter()

    result = train(small(init_from=str(last), steps=6), tmp_path, reporter)

    assert result["status"] == "succeeded" and result["step"] == 6
    assert reporter.series("eval/accuracy")[0] == [4, 6]
    assert sorted({s for s, k, _ in reporter.points if k == "train/reward"}) == [5, 6]


@pytest.mark.parametrize(
    "change",
    [{"sharing": "shared"}, {"lora_r": 4}, {"workflow": "eval_opt"}, {"finetune": "full"}],
)
def test_a_branch_that_changes_the_policy_layout_is_refused_naming_the_field(
    parent, tmp_path, change
):
    out, _ = parent
    config = small(init_from=str(out / "checkpoints" / "step-000002"), **change)
    with pytest.raises(ConfigError) as err:
        train(config, tmp_path, ListReporter())
    (field,) = change
    assert set(err.value.errors) == {field}
    assert "branch" in err.value.errors[field]


def test_a_missing_init_from_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "checkpoints" / "step-000002"
    with pytest.raises(FileNotFoundError, match="init_from.*nowhere"):
        train(small(init_from=str(missing)), tmp_path / "run", ListReporter())
    with pytest.raises(FileNotFoundError, match="not a checkpoint directory"):
        train(small(init_from=str(tmp_path)), tmp_path / "run2", ListReporter())


LATER = (
    "init_from",
    "stop_after_cliff",
    "grad_checkpointing",
    "grad_snapshots",
    "rollout_batch",
    "world_size",
    "episodes_per_step",
    "episodes_probe",
    "episodes_grad_share",
    "rollout_engine",
    "is_cap",
    "frozen_roles",
    "micro_batch_tokens",
    "batch_adapters",
    "fused_logprobs",
    "kernels",
    "second_opinion_sample",
)


def test_init_from_counts_in_the_hash_only_when_set():
    plain = small()
    # hashed as before the field existed, so older runs and their checkpoints keep their hash
    older = {k: v for k, v in plain.to_dict().items() if k not in LATER}
    blob = json.dumps(older, sort_keys=True, separators=(",", ":"))
    assert plain.hash() == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert small(init_from="/x/checkpoints/step-000002").hash() != plain.hash()
