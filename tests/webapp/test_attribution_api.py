"""Swap jobs through the API and the run page's forms: the plan shown before queueing, the
corners reused from the run's own evaluations, refusals that name why, and who may queue."""

import json
from pathlib import Path

import pytest

from tests.branches import give_checkpoints
from tests.people import bearer, make_experiment
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Run
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


@pytest.fixture
def trained(alice, tmp_path):
    run = make_experiment(alice, workflow="voting", sharing="per_role").runs.get()
    out = tmp_path / "data" / "runs" / str(run.id)
    give_checkpoints(run, out, best=4, steps=(4, 6))
    with open(out / "eval_problems.jsonl", "w") as fh:
        for step in (0, 4, 6):
            fh.write(json.dumps({"step": step, "per_problem": [0.25] * 16}) + "\n")
    write_points(run.id, [("sys/eval_seconds", s, 3.0) for s in (0, 4, 6)])
    return run


def test_the_plan_names_every_evaluation_and_what_it_reuses(client, trained, bob):
    answer = client.get(
        f"/api/v1/runs/{trained.id}/attribution-plan?kind=gain", headers=bearer(bob)
    ).json()
    assert answer["problem"] == "" and answer["method"] == "shapley"
    assert answer["steps"] == {"source": 0, "target": 6}
    assert [(e["key"], e["reuse_step"]) for e in answer["evaluations"]] == [
        ("-", 0),
        ("generator", None),
        ("aggregator", None),
        ("generator+aggregator", 6),
    ]
    assert answer["evaluations"][1]["sources"] == {"generator": "latest", "aggregator": "base"}
    assert answer["to_run"] == 2 and answer["estimated_seconds"] == 6.0


def test_a_cliff_attribution_goes_from_the_peak_to_the_final_checkpoint(client, trained, bob):
    answer = client.get(
        f"/api/v1/runs/{trained.id}/attribution-plan?kind=cliff", headers=bearer(bob)
    ).json()
    assert answer["steps"] == {"source": 4, "target": 6} and answer["to_run"] == 2


def test_the_owner_queues_an_attribution_once(client, trained, alice):
    headers = bearer(alice)
    url = f"/api/v1/runs/{trained.id}/swap-jobs"
    first = client.post(url, {"kind": "gain"}, content_type="application/json", headers=headers)
    again = client.post(url, {"kind": "gain"}, content_type="application/json", headers=headers)
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    assert SwapJob.objects.get().plan["to_run"] == 2
    listed = client.get(url, headers=headers).json()["jobs"]
    assert [job["kind"] for job in listed] == ["gain"]


def test_a_teammate_may_read_but_not_queue(client, trained, bob):
    response = client.post(
        f"/api/v1/runs/{trained.id}/swap-jobs",
        {"kind": "gain"},
        content_type="application/json",
        headers=bearer(bob),
    )
    assert response.status_code == 403 and not SwapJob.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({"kind": "everything"}, 400, "kind"),
        ({"kind": "mix", "sources": {"judge": "best"}}, 400, "sources"),
        ({"kind": "mix", "sources": {"generator": 3}}, 400, "sources"),
    ],
)
def test_bad_requests_name_the_field(client, trained, alice, body, status, where):
    response = client.post(
        f"/api/v1/runs/{trained.id}/swap-jobs",
        body,
        content_type="application/json",
        headers=bearer(alice),
    )
    assert response.status_code == status and where in response.json()["fields"]


def test_a_missing_checkpoint_or_an_unfinished_run_is_refused_with_the_reason(
    client, trained, alice
):
    url = f"/api/v1/runs/{trained.id}/swap-jobs"
    headers = bearer(alice)
    mix = {"kind": "mix", "sources": {"aggregator": "step-2"}}
    response = client.post(url, mix, content_type="application/json", headers=headers)
    assert response.status_code == 409
    assert "the run keeps no checkpoint of step 2" in response.json()["error"]
    outside = {"kind": "mix", "sources": {"aggregator": "/etc/checkpoints/step-000001"}}
    response = client.post(url, outside, content_type="application/json", headers=headers)
    refusal = response.json()["fields"]["sources"]
    assert response.status_code == 400 and "a path is not accepted here" in refusal
    Run.objects.filter(id=trained.id).update(status=Run.RUNNING)
    response = client.post(url, {"kind": "gain"}, content_type="application/json", headers=headers)
    assert response.status_code == 409 and "the run is running" in response.json()["error"]
    assert not SwapJob.objects.exists()


def test_best_and_final_at_one_step_leave_no_drop_to_attribute(client, trained, alice):
    root = Path(trained.checkpoint_dir) / "checkpoints"
    (root / "best.json").write_text(json.dumps({"step": 6, "accuracy": 1, "path": "step-000006"}))
    answer = client.get(
        f"/api/v1/runs/{trained.id}/attribution-plan?kind=cliff", headers=bearer(alice)
    ).json()
    assert "the weights of one step (6)" in answer["problem"]


def test_the_run_page_shows_the_cost_before_queueing_and_queues_from_its_button(
    client, trained, alice
):
    client.force_login(alice)
    page = client.get(f"/runs/{trained.id}/").content.decode()
    assert "final − base: 4 evaluations (2 to run, the rest the run's own), about 6 s." in page
    response = client.post(f"/runs/{trained.id}/attribute/", {"kind": "gain"})
    assert response.status_code == 302 and SwapJob.objects.get().kind == "gain"
    page = client.get(f"/runs/{trained.id}/").content.decode()
    assert "queued (0 of 4 evaluations)" in page
    assert "the run's own evaluation of step 6" in page


def test_a_run_sampled_by_vllm_reuses_none_of_its_evaluations(client, trained, bob):
    trained.config = {**trained.config, "rollout_engine": "vllm"}
    trained.save(update_fields=["config"])
    answer = client.get(
        f"/api/v1/runs/{trained.id}/attribution-plan?kind=gain", headers=bearer(bob)
    ).json()
    assert answer["to_run"] == 4 and answer["estimated_seconds"] == 12.0


def test_the_run_page_plans_its_three_kinds_from_one_read(client, trained, alice, monkeypatch):
    # The panel shows every kind's plan; each checkpoint name is resolved once and the
    # evaluation time read once for all three, not once a kind (three scans of the folder).
    from webapp.attribution import planning

    resolved, series = [], []
    resolve = planning.resolve_sources
    read = planning.read_series
    monkeypatch.setattr(
        planning,
        "resolve_sources",
        lambda *a, **k: resolved.append(k["default"]) or resolve(*a, **k),
    )
    monkeypatch.setattr(planning, "read_series", lambda *a: series.append(a) or read(*a))
    client.force_login(alice)
    page = client.get(f"/runs/{trained.id}/").content.decode()
    assert "final − peak" in page and "peak − base" in page
    assert sorted(resolved) == ["base", "best", "latest"] and len(series) == 1
