"""The second round of verdict rules on the pages: one capture verdict with one minimum of
evidence, "cannot judge" where accuracy is too low to judge, one onset for a degradation on
every page, and an alert refresh that survives a fall the radar sees twice."""

from __future__ import annotations

import json

import pytest

from tests.people import bearer
from tests.stats_runs import stored_run
from webapp.alerts.radar import refresh_alerts
from webapp.dashboards import tables
from webapp.experiments.models import Alert, Experiment
from webapp.runs.summaries import clear_cache, run_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_caches():
    clear_cache()


@pytest.fixture
def experiment(alice):
    return Experiment.objects.create(owner=alice, name="Round 2", preset="cpu-demo")


def shares(steps, gen):
    """grad_share points of a generator and an aggregator on one shared policy."""
    return [("role/generator/grad_share", s, gen) for s in steps] + [
        ("role/aggregator/grad_share", s, 1 - gen) for s in steps
    ]


def test_the_run_page_says_not_enough_steps_before_ten_logged_steps(client, experiment, alice):
    # Six logged steps with the generator's share at .9: the run page used to say "captured
    # by generator" while the radar and the alerts said nothing.
    run = stored_run(
        experiment, seed=0, sharing="shared", accuracy=None, extra=shares(range(6), 0.9)
    )
    client.force_login(alice)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert "not enough steps yet" in html and "by generator" not in html
    refresh_alerts(run)
    assert not Alert.objects.filter(run=run, kind="capture").exists()
    summaries = run_summaries([run])
    rows = tables.dynamics_rows([run], summaries)
    assert {row["captured"] for row in rows} == {"— not enough steps yet"}


def test_from_ten_steps_every_page_names_the_same_role(client, experiment, alice):
    run = stored_run(
        experiment, seed=1, sharing="shared", accuracy=None, extra=shares(range(12), 0.9)
    )
    client.force_login(alice)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert "by generator" in html
    refresh_alerts(run)
    assert list(Alert.objects.filter(run=run, kind="capture").values_list("role", flat=True)) == [
        "generator"
    ]
    rows = {
        row["role"]: row["captured"] for row in tables.dynamics_rows([run], run_summaries([run]))
    }
    assert rows == {"generator": "yes", "aggregator": "no"}


def test_accuracy_too_low_to_judge_says_so_on_the_run_and_experiment_pages(
    client, experiment, alice
):
    # Peak .03 with an SE of .02 an evaluation: the threshold is below 0, so "none below
    # −0.005" would claim what cannot be seen.
    accuracy = [0.0, 0.01, 0.03, 0.02, 0.01, 0.02, 0.0, 0.01, 0.02, 0.01]
    se = [("eval/accuracy_se", s, 0.02) for s in range(0, 100, 10)]
    run = stored_run(experiment, seed=2, sharing="per_role", accuracy=accuracy, extra=se)
    client.force_login(alice)
    for url in (f"/runs/{run.id}/", f"/experiments/{experiment.id}/"):
        html = client.get(url).content.decode()
        assert "cannot judge: accuracy too low" in html
        assert (
            "below −" not in html
            and "below -" not in html
            and "none" not in html.split("data-cliff-verdict")[1][:200]
        )


def test_a_degradation_has_its_onset_in_the_compare_table_too(client, experiment, alice):
    accuracy = [0.3, 0.29, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    se = [("eval/accuracy_se", s, 0.01) for s in range(0, 100, 10)]
    run = stored_run(experiment, seed=3, sharing="per_role", accuracy=accuracy, extra=se)
    summary = run_summaries([run])[run.id]
    onset = summary["accuracy"]["degradation_onset"]
    assert summary["accuracy"]["cliff_status"] == "degradation" and onset is not None
    (row,) = tables.run_rows([run], run_summaries([run]))
    assert row["onset"] == onset and row["cliff"] == f"degradation @{onset}"
    client.force_login(alice)
    assert f"degradation @{onset}" in client.get(f"/runs/{run.id}/").content.decode()


def test_a_fall_the_radar_sees_twice_is_stored_once_and_the_refresh_succeeds(experiment):
    # Down from the base at step 10; one evaluation back near it at 60 re-arms the radar,
    # and the fall is seen again with the same onset. The upsert of two rows with one key
    # raised CardinalityViolation and left every alert of the run stale.
    accuracy = [0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.45, 0.1, 0.1, 0.1, 0.1]
    points = [("eval/accuracy", 10 * i, a) for i, a in enumerate(accuracy)]
    run = stored_run(experiment, seed=4, sharing="per_role", accuracy=None, extra=points)
    stored = refresh_alerts(run)
    assert stored is not None
    assert [(a.kind, a.step) for a in stored] == [("degradation", 10)]


def test_a_finished_external_run_shows_its_last_step_and_why_it_has_no_checkpoint(
    client, experiment, alice
):
    # Once a finished external run read "step 0 of 8" and "No best checkpoint yet".
    created = client.post(
        "/api/v1/runs",
        json.dumps({"name": "elsewhere", "experiment": experiment.id, "config": {"steps": 8}}),
        content_type="application/json",
        headers=bearer(alice),
    ).json()
    points = [{"key": "eval/accuracy", "step": s, "value": 0.5} for s in (0, 4, 8)]
    client.post(
        f"/api/v1/runs/{created['id']}/metrics",
        json.dumps({"points": points[::-1]}),
        content_type="application/json",
        headers=bearer(alice),
    )
    client.post(
        f"/api/v1/runs/{created['id']}/finish",
        json.dumps({"status": "succeeded"}),
        content_type="application/json",
        headers=bearer(alice),
    )
    client.force_login(alice)
    html = client.get(f"/runs/{created['id']}/").content.decode()
    assert "step 8 of 8" in html and "step 0 of 8" not in html
    assert "No best checkpoint yet" not in html
    assert "logged from elsewhere through the API (external)" in html
