"""The live radar's alerts: evaluated when points arrive through the API, kept idempotently,
listed at /alerts/ and GET /api/v1/alerts, shown on the run and experiment pages.

The accuracy curve is built by hand so every event is known in advance: evaluations every 10
steps, base 0.2, peak 0.7 at step 30, then 0.3 at step 50 and 0.2 after. θ = max(0.10,
0.5 × (0.7 − 0.2)) = 0.25, so the line is 0.45; the rolling median of 3 first drops below it
at step 50 (median of 0.7, 0.3, 0.2), and the cliff is confirmed by the fifth evaluation at
or after it, step 90.
"""

import json

import pytest
from django.test import TestCase

from tests.people import bearer, make_experiment
from webapp.alerts.radar import after_points, settle_finished_runs
from webapp.experiments.models import Alert
from workers.execute import finish

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_batch(radar_inline):
    """Judge each batch before the request returns: these tests read the alerts right after
    each write (the queue, its debounce and a real worker have their own tests,
    test_radar_task.py)."""


STEPS = list(range(0, 110, 10))
ACCURACY = [0.2, 0.4, 0.6, 0.7, 0.7, 0.3, 0.2, 0.2, 0.2, 0.2, 0.2]


def accuracy_points(upto=None):
    # With the SE a Troupe run logs beside each evaluation (.02 here: noise far below the
    # drop), so the cliff's noise test has its evidence (docs/analysis.md).
    return [
        {"key": key, "step": s, "value": value}
        for s, v in zip(STEPS, ACCURACY, strict=True)
        for key, value in (("eval/accuracy", v), ("eval/accuracy_se", 0.02))
        if upto is None or s <= upto
    ]


def send(client, user, run, points):
    """POST the points, then what their commit sets off: the radar's queued evaluation."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(
            f"/api/v1/runs/{run.id}/metrics",
            json.dumps({"points": points}),
            content_type="application/json",
            headers=bearer(user),
        )


def rows(run):
    return list(
        Alert.objects.filter(run=run)
        .order_by("step", "kind")
        .values_list("kind", "role", "step", "seen_at", "provisional")
    )


def test_a_cliff_written_through_the_api_becomes_a_confirmed_alert(client, run, alice):
    assert send(client, alice, run, accuracy_points()).status_code == 200

    assert rows(run) == [("cliff", "", 50, 90, False)]
    alert = Alert.objects.get(run=run)
    assert alert.value == 0.3
    assert alert.limit == pytest.approx(0.45)


def test_a_provisional_cliff_is_the_same_row_once_confirmed(client, run, alice):
    send(client, alice, run, accuracy_points(upto=70))
    assert rows(run) == [("cliff", "", 50, 70, True)]
    first = Alert.objects.get(run=run).pk

    send(client, alice, run, accuracy_points()[8:])

    assert rows(run) == [("cliff", "", 50, 90, False)]
    assert Alert.objects.get(run=run).pk == first


def test_writing_the_points_again_changes_no_alert(client, run, alice):
    send(client, alice, run, accuracy_points())
    before = list(Alert.objects.filter(run=run).values())

    send(client, alice, run, accuracy_points())

    assert list(Alert.objects.filter(run=run).values()) == before


def test_a_provisional_cliff_the_run_recovers_from_is_kept_as_retracted(client, run, alice, bob):
    send(client, alice, run, accuracy_points(upto=70))
    assert rows(run) == [("cliff", "", 50, 70, True)]

    send(client, alice, run, [{"key": "eval/accuracy", "step": 80, "value": 0.8}])

    assert rows(run) == [("cliff", "", 50, 70, True)]  # kept, not deleted …
    alert = Alert.objects.get(run=run)
    assert alert.retracted is not None  # … with when and why
    assert alert.retraction == "no longer seen at step 80: the series recovered"
    client.force_login(bob)
    listed = client.get(f"/api/v1/alerts?run={run.id}").json()["alerts"]
    assert [(a["kind"], a["retraction"]) for a in listed] == [("cliff", alert.retraction)]
    assert listed[0]["retracted"] == alert.retracted.isoformat()
    assert client.get(f"/api/v1/alerts?run={run.id}&state=current").json()["alerts"] == []
    retracted = client.get(f"/api/v1/alerts?run={run.id}&state=retracted").json()["alerts"]
    assert [a["id"] for a in retracted] == [alert.pk]
    page = client.get(f"/alerts/?run={run.id}").content.decode()
    assert "data-retracted" in page and "the series recovered" in page
    run_page = client.get(f"/runs/{run.id}/").content.decode()
    assert "data-radar-retracted" in run_page  # the radar panel shows current events only
    assert client.get("/api/v1/alerts?state=gone").status_code == 400


def test_a_retracted_cliff_seen_again_is_current_again(client, run, alice):
    send(client, alice, run, accuracy_points(upto=70))
    send(client, alice, run, [{"key": "eval/accuracy", "step": 80, "value": 0.8}])
    assert Alert.objects.get(run=run).retracted is not None

    send(client, alice, run, [{"key": "eval/accuracy", "step": 80, "value": 0.2}])

    alert = Alert.objects.get(run=run)
    assert (alert.retracted, alert.retraction) == (None, "")


def test_a_retracted_alert_is_no_work_for_the_finished_runs_sweep(client, run, alice):
    send(client, alice, run, accuracy_points(upto=70))
    send(client, alice, run, [{"key": "eval/accuracy", "step": 80, "value": 0.8}])
    run.status = run.SUCCEEDED
    run.save(update_fields=["status"])

    # A retracted alert is not waiting for a verdict: the sweep leaves the run alone.
    assert settle_finished_runs() == []


def test_per_role_events_come_from_role_series(client, run, alice):
    # Entropy of the generator halves after ten steps: a collapse at step 10.
    entropy = [{"key": "role/generator/entropy", "step": s, "value": 1.0} for s in range(10)]
    entropy += [{"key": "role/generator/entropy", "step": s, "value": 0.2} for s in range(10, 15)]
    zero_std = [{"key": "train/frac_zero_std", "step": s, "value": 0.9} for s in range(3, 8)]

    send(client, alice, run, entropy + zero_std)

    assert rows(run) == [
        ("zero_std_groups", "", 3, 7, False),
        ("entropy_collapse", "generator", 10, 14, False),
    ]


def test_a_non_finite_loss_or_reward_is_an_alert_shown_on_the_run_page(client, run, alice):
    # Troupe's API takes JSON's NaN and Infinity as MLflow's client sends them.
    body = [
        '{"key": "train/loss", "step": 0, "value": 0.7}',
        '{"key": "train/reward", "step": 0, "value": 0.1}',
        '{"key": "train/loss", "step": 1, "value": NaN}',
        '{"key": "train/reward", "step": 2, "value": -Infinity}',
    ]
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post(
            f"/api/v1/runs/{run.id}/metrics",
            '{"points": [' + ", ".join(body) + "]}",
            content_type="application/json",
            headers=bearer(alice),
        )
    assert response.status_code == 200

    assert rows(run) == [
        ("non_finite_loss", "", 1, 1, False),
        ("non_finite_reward", "", 2, 2, False),
    ]
    assert Alert.objects.get(run=run, kind="non_finite_loss").value is None
    # The alerts API filters on the new kinds, and its JSON stays JSON.
    client.force_login(alice)
    listed = client.get("/api/v1/alerts", {"kind": "non_finite_reward"})
    assert [a["step"] for a in json.loads(listed.content)["alerts"]] == [2]
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert ">non-finite loss<" in page and ">non-finite reward<" in page  # in words
    assert 'title="non_finite_loss"' in page  # the code the alerts' filter takes, on hover


def test_points_the_radar_does_not_read_queue_no_evaluation(run):
    with TestCase.captureOnCommitCallbacks() as queued:
        assert after_points(run.id, ["train/kl", "sys/step_seconds"]) is False
    assert queued == []

    with TestCase.captureOnCommitCallbacks() as queued:
        assert after_points(run.id, ["sys/step_seconds", "eval/accuracy"]) is True
    assert len(queued) == 1
    for key in ("train/loss", "train/reward"):  # a NaN there is an alert
        with TestCase.captureOnCommitCallbacks() as queued:
            assert after_points(run.id, [key]) is True


def test_anyone_signed_in_reads_the_alerts_api(client, run, alice, bob):
    send(client, alice, run, accuracy_points())
    other = make_experiment(alice, name="other").runs.get()

    response = client.get(f"/api/v1/alerts?experiment={run.experiment_id}", headers=bearer(bob))

    assert response.status_code == 200
    (alert,) = response.json()["alerts"]
    assert alert["run"] == run.id and alert["experiment"] == run.experiment_id
    assert (alert["kind"], alert["role"], alert["step"], alert["seen_at"]) == (
        "cliff",
        None,
        50,
        90,
    )
    assert alert["provisional"] is False
    assert client.get(f"/api/v1/alerts?run={other.id}", headers=bearer(bob)).json() == {
        "alerts": []
    }
    client.force_login(bob)
    assert len(client.get("/api/v1/alerts?kind=cliff").json()["alerts"]) == 1
    assert client.get("/api/v1/alerts?kind=amplification").json() == {"alerts": []}


def test_the_alerts_api_needs_a_login(client, run, alice):
    send(client, alice, run, accuracy_points())

    response = client.get("/api/v1/alerts")

    assert response.status_code == 401
    assert "error" in response.json()


def test_the_alerts_api_names_a_bad_filter(client, alice):
    response = client.get("/api/v1/alerts?kind=boom&run=x&limit=0", headers=bearer(alice))

    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"kind", "run", "limit"}
    assert client.get("/api/v1/alerts?run=999999", headers=bearer(alice)).status_code == 404


def test_the_alerts_page_lists_events_with_links_to_their_runs(client, run, alice, bob):
    send(client, alice, run, accuracy_points())
    client.force_login(bob)

    page = client.get(f"/alerts/?experiment={run.experiment_id}&kind=cliff").content.decode()

    assert f'href="/runs/{run.id}/"' in page
    assert "confirmed @90" in page
    assert "No alerts" in client.get("/alerts/?kind=capture").content.decode()


def test_the_alerts_page_needs_a_login(client):
    response = client.get("/alerts/")

    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_the_run_page_shows_the_radar_and_the_best_checkpoint(client, run, alice, bob):
    best = [
        {"key": "ckpt/best_step", "step": 0, "value": 0},
        {"key": "ckpt/best_accuracy", "step": 0, "value": 0.2},
        {"key": "ckpt/best_step", "step": 30, "value": 30},
        {"key": "ckpt/best_accuracy", "step": 30, "value": 0.7},
        {"key": "ckpt/best_step", "step": 40, "value": 30},
        {"key": "ckpt/best_accuracy", "step": 40, "value": 0.7},
    ]
    send(client, alice, run, accuracy_points() + best)
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="radar"' in page
    assert 'data-alert-kind="cliff"' in page and "confirmed @90" in page
    assert "Best checkpoint: step <strong>30</strong>, accuracy <strong>0.700</strong>" in page


def test_the_experiment_page_shows_each_runs_worst_event(client, alice, bob):
    experiment = make_experiment(alice, runs=2)
    first, second = experiment.runs.order_by("seed")
    send(client, alice, first, accuracy_points())
    client.force_login(bob)

    page = client.get(f"/experiments/{experiment.id}/").content.decode()

    assert f'href="/alerts/?run={first.id}"' in page
    assert "cliff @50" in page
    assert f'href="/alerts/?run={second.id}"' not in page


def test_a_finished_run_settles_its_provisional_alerts(client, run, alice):
    send(client, alice, run, accuracy_points(upto=70))
    assert rows(run) == [("cliff", "", 50, 70, True)]
    run.status = run.SUCCEEDED
    run.save(update_fields=["status"])

    assert settle_finished_runs() == [run.id]

    # Finished, the §6 verdict is final: the run ends below its peak − θ, a confirmed cliff.
    assert rows(run) == [("cliff", "", 50, 70, False)]
    assert settle_finished_runs() == []


def _running(run, external):
    run.status, run.external, run.attempts = run.RUNNING, external, 1
    run.save(update_fields=["status", "external", "attempts"])


def test_a_run_ended_through_the_api_gets_its_verdict_with_its_end(client, run, alice):
    _running(run, external=True)
    # Below the line for two of the last three evaluations: no alert while it trains …
    send(client, alice, run, accuracy_points(upto=60))
    assert rows(run) == []

    response = client.post(
        f"/api/v1/runs/{run.id}/finish",
        json.dumps({"status": "succeeded"}),
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 200
    # … but ended, the §6 verdict is final (mean of the last three 0.4 < 0.45): a confirmed
    # cliff at once, not at the next sweep (which only looks at provisional alerts).
    assert rows(run) == [("cliff", "", 50, 60, False)]


def test_a_run_a_worker_finishes_gets_its_verdict_with_its_end(client, run, alice):
    _running(run, external=False)
    send(client, alice, run, accuracy_points(upto=70))
    assert rows(run) == [("cliff", "", 50, 70, True)]

    assert finish(run, status=run.SUCCEEDED, line="Finished at step 70.")

    assert rows(run) == [("cliff", "", 50, 70, False)]
