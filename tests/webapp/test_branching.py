"""Planning and queueing branches (webapp/branching/branch.py): which checkpoints a run
offers, what each child's config is, what is refused and how the error names it, and the
frozen copy of the checkpoint the children start from."""

import shutil
from pathlib import Path

import pytest

from tests.branches import give_checkpoints
from tests.people import make_experiment
from trainer.config import ConfigError
from webapp.branching.branch import kept_checkpoints, plan_branches, queue_branches
from webapp.experiments.models import Run, RunLog
from webapp.runs import checkpoint_refs, queueing

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


@pytest.fixture
def parent(run, tmp_path, data_dir):
    return give_checkpoints(run, tmp_path / "runs" / str(run.id))


@pytest.fixture
def voting_parent(alice, tmp_path, data_dir):
    run = make_experiment(alice, workflow="voting", sharing="per_role").runs.get()
    return give_checkpoints(run, tmp_path / "runs" / str(run.id))


def test_a_run_offers_its_peak_first_then_its_step_checkpoints_newest_first(parent):
    kept = kept_checkpoints(parent)

    assert [(k.name, k.step, k.peak) for k in kept] == [
        ("best-000002", 2, True),
        ("step-000006", 6, False),
        ("step-000004", 4, False),
    ]
    assert kept[0].accuracy == 0.5 and kept[1].accuracy == 0.25


def test_a_peak_at_the_last_step_is_offered_once_and_its_child_trains_past_it(
    run, tmp_path, data_dir
):
    parent = give_checkpoints(run, tmp_path / "out", best=30, steps=(25, 30))

    assert [(k.name, k.step) for k in kept_checkpoints(parent)] == [
        ("best-000030", 30),  # the step checkpoint of the same step is the same state
        ("step-000025", 25),
    ]
    plan = plan_branches(parent, "best", [], control=True)
    eval_every = parent.config["eval_every"]
    assert plan.checkpoint.name == "best-000030"
    assert plan.children[0].config["steps"] == 30 + 3 * eval_every


def test_a_step_checkpoint_folded_into_the_peak_is_still_found_by_name(run, tmp_path, data_dir):
    parent = give_checkpoints(run, tmp_path / "out", best=30, steps=(25, 30))

    assert plan_branches(parent, "step-000030", [], control=True).checkpoint.step == 30
    assert plan_branches(parent, "latest", [], control=True).checkpoint.step == 30


def test_a_child_from_before_the_last_step_keeps_the_parents_steps(parent):
    plan = plan_branches(parent, "step-000004", [], control=True)

    assert plan.children[0].config["steps"] == parent.config["steps"]


def test_a_run_without_checkpoints_offers_none_and_cannot_be_planned(run, tmp_path):
    Run.objects.filter(id=run.id).update(checkpoint_dir=str(tmp_path / "not-yet"))
    run.refresh_from_db()

    assert kept_checkpoints(run) == []
    with pytest.raises(ConfigError) as caught:
        plan_branches(run, "best", [], control=True)
    assert "no checkpoint" in caught.value.errors["checkpoint"]


def test_an_external_run_cannot_branch(parent):
    Run.objects.filter(id=parent.id).update(external=True)
    parent.refresh_from_db()

    assert kept_checkpoints(parent) == []
    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", [], control=True)
    assert "external" in caught.value.errors["run"]


def test_the_plan_has_the_control_first_then_one_child_per_change(voting_parent):
    requests = [
        ("lr", {"lr_factor": 0.1}),
        ("kl", {"kl_beta_per_role": {"generator": "0.05"}}),
        ("coherence", {"coherence_lambda": 0.5}),
    ]

    plan = plan_branches(voting_parent, "best", requests, control=True)

    assert plan.checkpoint.name == "best-000002" and plan.checkpoint.step == 2
    assert [c.intervention for c in plan.children] == [
        {},
        {"lr": 0.0003},  # the cpu-demo's 3e-3 cut tenfold, without float noise
        {"kl_beta_per_role": {"generator": 0.05}},
        {"coherence_lambda": 0.5},
    ]
    assert [c.label for c in plan.children] == [
        "control (no change)",
        "lr 0.003 → 0.0003",
        "KL anchor of generator 0 → 0.05",
        "coherence λ 0 → 0.5",
    ]
    parent_config = voting_parent.config
    for child in plan.children:
        assert child.config["init_from"] == str(
            Path(voting_parent.checkpoint_dir) / "checkpoints" / "best-000002"
        )
        changed = {k for k in child.config if child.config[k] != parent_config.get(k)}
        assert changed == {"init_from", *child.intervention}


def test_a_per_role_anchor_keeps_the_other_roles_anchors(alice, tmp_path, data_dir):
    run = make_experiment(alice, workflow="voting", kl_beta_per_role={"aggregator": 0.2}).runs.get()
    parent = give_checkpoints(run, tmp_path / "out")

    plan = plan_branches(parent, "best", [("kl", {"kl_beta_per_role": {"generator": 0.1}})], False)

    assert plan.children[0].config["kl_beta_per_role"] == {"aggregator": 0.2, "generator": 0.1}


def test_a_kl_anchor_for_every_role_changes_kl_beta(parent):
    plan = plan_branches(parent, "step-000004", [("kl", {"kl_beta": 0.02})], control=False)

    (child,) = plan.children
    assert child.intervention == {"kl_beta": 0.02} and child.config["kl_beta"] == 0.02
    assert child.label == "KL anchor 0 → 0.02"
    assert plan.checkpoint.step == 4


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"lr_factor": 1.5}, "not a cut"),
        ({"lr_factor": 0}, "not a cut"),
        ({"lr_factor": "abc"}, "'abc' is not a number"),
        ({"coherence_lambda": 0.0}, "already 0: that changes nothing"),
        ({"kl_beta_per_role": {"solver": 0}}, "already 0: that changes nothing"),
        ({"sharing": "per_role"}, "not a change a branch can make"),
        ({"lr_factor": 0.5, "kl_beta": 0.1}, "exactly one change"),
        ({"kl_beta_per_role": {"solver": 0.1, "x": 0.2}}, "one role"),
        ("lr_factor", "exactly one change"),
    ],
)
def test_a_bad_change_is_refused_under_its_name(parent, request_, message):
    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", [("branches[0]", request_)], control=True)

    assert message in caught.value.errors["branches[0]"]


def test_the_trainers_validation_names_the_config_field(parent):
    requests = [("kl", {"kl_beta": -1}), ("anchor", {"kl_beta_per_role": {"solver": -0.5}})]

    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", requests, control=True)

    assert caught.value.errors["kl"] == "kl_beta: -1.0 must be at least 0.0"
    assert caught.value.errors["anchor"].startswith("kl_beta_per_role: ")


def test_a_kl_anchor_for_a_role_the_workflow_lacks_is_refused(parent):
    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", [("kl", {"kl_beta_per_role": {"judge": 0}})], False)

    assert caught.value.errors["kl"] == "'judge' is not a role of this run; its roles: solver"


def test_asking_for_nothing_is_refused(parent):
    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", [], control=False)

    assert "nothing to queue" in caught.value.errors["control"]


def test_the_same_change_twice_is_refused(parent):
    requests = [("a", {"lr_factor": 0.5}), ("b", {"lr_factor": "0.5"})]

    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "best", requests, control=False)

    assert caught.value.errors == {"b": "the same change as a"}


def test_an_unknown_checkpoint_is_refused_naming_the_kept_ones(parent):
    with pytest.raises(ConfigError) as caught:
        plan_branches(parent, "step-000099", [], control=True)

    assert caught.value.errors["checkpoint"] == (
        "'step-000099' is not a kept checkpoint; kept: best-000002, step-000006, step-000004"
    )


def test_latest_names_the_newest_step_checkpoint(parent):
    assert plan_branches(parent, "latest", [], control=True).checkpoint.name == "step-000006"


def test_queueing_stores_the_children_with_their_lineage_and_sends_them(
    parent, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(queueing, "send_run", lambda run: sent.append(run.id))
    plan = plan_branches(parent, "best", [("lr", {"lr_factor": 0.5})], control=True)

    with django_capture_on_commit_callbacks(execute=True):
        children = queue_branches(plan)

    assert sent == [child.id for child in children]
    control, cut = (Run.objects.get(id=child.id) for child in children)
    assert control.parent_id == cut.parent_id == parent.id
    assert control.experiment_id == parent.experiment_id
    assert (control.branch_step, cut.branch_step) == (2, 2)
    assert (control.intervention, cut.intervention) == ({}, {"lr": 0.0015})
    assert control.status == Run.QUEUED and control.queue == "cpu"
    assert cut.config["lr"] == 0.0015 and cut.config_hash != control.config_hash
    assert cut.name == f"lr 0.003 → 0.0015 · from run {parent.id} @2"
    assert RunLog.objects.filter(run=cut, line__startswith=f"Branched from run {parent.id}")
    assert RunLog.objects.filter(run=parent, line__startswith="Branches queued from step 2")


def test_the_children_start_from_a_frozen_copy_the_parent_cannot_prune(parent, data_dir):
    plan = plan_branches(parent, "best", [], control=True)
    (child,) = queue_branches(plan)

    frozen = data_dir / child.config["init_from"]  # stored relative to the data directory
    assert frozen.parent.parent.parent == data_dir / "branch-points"
    assert frozen.parent.parent.name.startswith(f"run-{parent.id}-")
    assert frozen.relative_to(frozen.parent.parent) == Path("checkpoints/best-000002")
    original = Path(parent.checkpoint_dir) / "checkpoints" / "best-000002"
    # the parent trains on and replaces its best: the child still finds what it came from
    for path in original.iterdir():
        path.unlink()
    original.rmdir()
    assert (frozen / "state.pt").read_bytes() == b"best state of step 2"
    assert (frozen.parent.parent / "config.json").exists()  # laid out as a run directory


def test_each_branching_freezes_its_own_copy(parent, data_dir):
    first = queue_branches(plan_branches(parent, "best", [], control=True))
    second = queue_branches(plan_branches(parent, "best", [("lr", {"lr_factor": 0.1})], False))

    paths = {data_dir / first[0].config["init_from"], data_dir / second[0].config["init_from"]}
    assert len(paths) == 2 and all((p / "state.pt").exists() for p in paths)


def test_a_checkpoint_pruned_after_planning_is_a_checkpoint_error(parent):
    plan = plan_branches(parent, "step-000004", [], control=True)
    shutil.rmtree(Path(parent.checkpoint_dir) / "checkpoints" / "step-000004")

    with pytest.raises(ConfigError) as caught:
        queue_branches(plan)

    assert "no longer kept" in caught.value.errors["checkpoint"]
    assert not Run.objects.filter(parent=parent).exists()


def test_a_checkpoint_is_copied_where_it_cannot_be_linked(parent, monkeypatch, data_dir):
    def no_links(source, target):
        raise OSError("cross-device link")

    monkeypatch.setattr(checkpoint_refs.os, "link", no_links)

    (child,) = queue_branches(plan_branches(parent, "step-000004", [], control=True))

    assert (data_dir / child.config["init_from"] / "state.pt").read_bytes() == b"state of step 4"
