"""Lineage in words and in the run API (webapp/runs/lineage.py): what a branch changed,
its parent and step, a parent's children, and the family a compare view overlays."""

import pytest

from tests.people import bearer, make_experiment
from trainer.config import make_config
from webapp.experiments.models import Run
from webapp.runs.lineage import (
    change_text,
    family_of,
    from_branch_step,
    lineage_text,
    number,
)
from webapp.runs.queueing import new_run

pytestmark = pytest.mark.django_db


def branch(parent: Run, step: int, intervention: dict, **config) -> Run:
    child = new_run(parent.experiment, make_config("cpu-demo", **{**config}))
    child.parent, child.branch_step, child.intervention = parent, step, intervention
    child.save()
    return child


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e-4, "0.0001"),
        (2e-5, "2e-5"),
        (0.1, "0.1"),
        (0.0010000000000000002, "0.001"),
        (3, "3"),
        (1.5e12, "1.5e12"),
        (None, "None"),
    ],
)
def test_numbers_read_short(value, text):
    assert number(value) == text


def test_a_change_reads_as_old_to_new():
    config = {
        "lr": 1e-4,
        "kl_beta": 0.01,
        "kl_beta_per_role": {"aggregator": 0.2},
        "coherence_lambda": 0.0,
    }

    assert change_text({"lr": 2e-5}, config) == "lr 0.0001 → 2e-5"
    assert change_text({"kl_beta": 0.05}, config) == "KL anchor 0.01 → 0.05"
    assert change_text({"kl_beta_per_role": {"generator": 0.1}}, config) == (
        "KL anchor of generator 0.01 → 0.1"  # a role without its own anchor has kl_beta
    )
    assert change_text({"kl_beta_per_role": {"aggregator": 0}}, config) == (
        "KL anchor of aggregator 0.2 → 0"
    )
    assert change_text({"coherence_lambda": 0.5}, config) == "coherence λ 0 → 0.5"
    assert change_text({}, config) == "control (no change)"


def test_a_branch_says_where_it_came_from(run):
    child = branch(run, 4, {"lr": 0.0003})

    assert lineage_text(child) == f"branched from run #{run.id} at step 4: lr 0.003 → 0.0003"
    assert lineage_text(run) == ""


def test_a_branch_of_a_deleted_run_still_says_its_step_and_change(run):
    child = branch(run, 4, {"coherence_lambda": 0.5})
    run.delete()
    child.refresh_from_db()

    assert child.parent is None
    assert lineage_text(child) == "branched from a deleted run at step 4: coherence λ ? → 0.5"


def test_the_run_api_gives_a_parent_its_children_control_first(client, run, bob):
    cut = branch(run, 4, {"lr": 0.0003})
    control = branch(run, 4, {})

    body = client.get(f"/api/v1/runs/{run.id}", headers=bearer(bob)).json()

    lineage = body["lineage"]
    assert lineage["parent"] is None and lineage["branch_step"] is None
    assert lineage["intervention"] is None and lineage["text"] is None
    assert [c["id"] for c in lineage["children"]] == [control.id, cut.id]
    assert lineage["children"][1] == {
        "id": cut.id,
        "branch_step": 4,
        "intervention": {"lr": 0.0003},
        "text": "lr 0.003 → 0.0003",
        "status": "queued",
        "url": f"/runs/{cut.id}/",
    }


def test_the_run_api_gives_a_branch_its_parent_step_and_change(client, run, bob):
    child = branch(run, 4, {"lr": 0.0003})

    detail = client.get(f"/api/v1/runs/{child.id}", headers=bearer(bob)).json()["lineage"]
    listed = client.get(f"/api/v1/runs?experiment={run.experiment_id}", headers=bearer(bob))

    assert detail["parent"] == run.id and detail["branch_step"] == 4
    assert detail["intervention"] == {"lr": 0.0003} and detail["children"] == []
    assert detail["text"] == f"branched from run #{run.id} at step 4: lr 0.003 → 0.0003"
    by_id = {r["id"]: r["lineage"] for r in listed.json()["runs"]}
    assert by_id[child.id] == {"parent": run.id, "branch_step": 4, "intervention": {"lr": 0.0003}}


def test_a_family_is_the_parent_and_its_branches_from_any_member(run, alice):
    cut = branch(run, 4, {"lr": 0.0003})
    control = branch(run, 4, {})
    lonely = make_experiment(alice, name="other").runs.get()

    for member in (run, cut, control):
        family = family_of(member.id)
        assert family.run_ids == [run.id, control.id, cut.id]
        assert family.branch_steps == [4]
        assert family.labels() == {
            run.id: f"run {run.id} · parent",
            control.id: f"run {control.id} · control (no change)",
            cut.id: f"run {cut.id} · lr 0.003 → 0.0003",
        }
    assert family_of(lonely.id).run_ids == [lonely.id]
    assert family_of(424242) is None


def test_a_branchs_series_starts_at_its_branch_step():
    series = {"steps": [0, 2, 4, 6], "values": [0.1, 0.2, 0.3, 0.4]}

    assert from_branch_step(series, 4) == {"steps": [4, 6], "values": [0.3, 0.4]}
    assert from_branch_step(series, None) == series
