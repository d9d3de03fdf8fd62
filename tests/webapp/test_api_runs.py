"""/api/v1/runs: listing, reading, external runs, cancel, resume, finish and delete, each with
who may and may not."""

import pytest

from tests.people import bearer, make_experiment
from webapp.experiments.models import MetricPoint, Run
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def post(client, user, url, body=None):
    return client.post(url, body or {}, content_type="application/json", headers=bearer(user))


def test_the_teammate_lists_the_runs_of_an_experiment(client, alice, bob):
    experiment = make_experiment(alice, runs=3)
    make_experiment(alice, name="other", runs=2)

    response = client.get(f"/api/v1/runs?experiment={experiment.id}", headers=bearer(bob))

    assert response.status_code == 200
    runs = response.json()["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert runs[0]["status"] == "queued" and runs[0]["cell"]["model"] == "tiny-s"
    assert runs[0]["url"] == f"/runs/{runs[0]['id']}/"


def test_listing_runs_needs_an_experiment(client, alice):
    response = client.get("/api/v1/runs", headers=bearer(alice))

    assert response.status_code == 400
    assert response.json()["fields"] == {"experiment": "required"}


def test_listing_runs_of_a_malformed_experiment_id_gets_400(client, alice):
    response = client.get("/api/v1/runs?experiment=abc", headers=bearer(alice))

    assert response.status_code == 400
    assert "experiment" in response.json()["fields"]


def test_listing_runs_of_an_unknown_experiment_gets_404(client, alice):
    assert client.get("/api/v1/runs?experiment=424242", headers=bearer(alice)).status_code == 404


def test_a_run_reads_with_its_config_and_error(client, run, alice, bob):
    run.status, run.error_type, run.error_message = Run.FAILED, "ValueError", "bad data"
    run.error_traceback = "Traceback …"
    run.save()

    body = client.get(f"/api/v1/runs/{run.id}", headers=bearer(alice)).json()

    assert body["config"]["workflow"] == "single" and body["config_hash"] == run.config_hash
    assert body["error"] == {
        "type": "ValueError",
        "message": "bad data",
        "traceback": "Traceback …",
    }
    # Others read the one-line error; the traceback is the owner's and staff's.
    body = client.get(f"/api/v1/runs/{run.id}", headers=bearer(bob)).json()
    assert body["error"] == {"type": "ValueError", "message": "bad data"}


def test_an_unknown_run_gets_404(client, alice):
    response = client.get("/api/v1/runs/31337", headers=bearer(alice))

    assert response.status_code == 404
    assert response.json() == {"error": "There is no run 31337."}


def test_the_owner_creates_an_external_run_to_log_into(client, experiment, alice):
    body = {"name": "notebook", "experiment": experiment.id, "config": {"workflow": "voting"}}

    response = post(client, alice, "/api/v1/runs", body)

    assert response.status_code == 201
    run = Run.objects.get(id=response.json()["id"])
    assert run.external and run.status == Run.RUNNING and run.queue == ""
    assert (run.name, run.workflow, run.experiment) == ("notebook", "voting", experiment)


def test_an_external_runs_free_form_config_shows_on_its_pages(client, experiment, alice):
    """A role map of strings or nulls once made the run page and its clone form a 500."""
    config = {"kl_beta_per_role": {"a": "x", "b": None, "c": 0.5}, "notes": [1, {"k": "v"}]}
    body = {"name": "free", "experiment": experiment.id, "config": config}
    run_id = post(client, alice, "/api/v1/runs", body).json()["id"]
    client.force_login(alice)

    for url in (f"/runs/{run_id}/", f"/experiments/new/?run={run_id}"):
        response = client.get(url)
        assert response.status_code == 200, url


def test_the_teammate_may_not_add_a_run_to_the_owners_experiment(client, experiment, bob):
    response = post(client, bob, "/api/v1/runs", {"name": "x", "experiment": experiment.id})

    assert response.status_code == 403
    assert experiment.runs.count() == 1


def test_an_external_run_needs_a_name_and_an_experiment(client, alice):
    assert post(client, alice, "/api/v1/runs", {"experiment": 1}).json()["fields"] == {
        "name": "required: a non-empty string"
    }
    response = post(client, alice, "/api/v1/runs", {"name": "x"})
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["experiment"]
    response = post(client, alice, "/api/v1/runs", {"name": "x", "experiment": "three"})
    assert response.status_code == 400


def test_an_external_run_of_an_unknown_experiment_gets_404(client, alice):
    assert (
        post(client, alice, "/api/v1/runs", {"name": "x", "experiment": 99999}).status_code == 404
    )


def test_the_teammate_may_not_cancel(client, run, bob):
    response = post(client, bob, f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 403
    assert "owner" in response.json()["error"]
    run.refresh_from_db()
    assert run.status == Run.QUEUED and not run.cancel_requested


def test_the_owner_cancels_a_queued_run_at_once(client, run, alice):
    response = post(client, alice, f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    run.refresh_from_db()
    assert run.status == Run.CANCELLED and run.finished is not None


def test_staff_asks_a_running_run_to_stop(client, run, carol):
    Run.objects.filter(id=run.id).update(status=Run.RUNNING)

    response = post(client, carol, f"/api/v1/runs/{run.id}/cancel")

    assert response.json() == {"id": run.id, "status": "running", "cancel_requested": True}
    run.refresh_from_db()
    assert run.status == Run.RUNNING and run.cancel_requested


def test_cancelling_a_finished_run_gets_409(client, run, alice):
    Run.objects.filter(id=run.id).update(status=Run.SUCCEEDED)

    assert post(client, alice, f"/api/v1/runs/{run.id}/cancel").status_code == 409


def test_the_teammate_may_not_resume(client, run, bob):
    Run.objects.filter(id=run.id).update(status=Run.FAILED)

    assert post(client, bob, f"/api/v1/runs/{run.id}/resume").status_code == 403


def test_resuming_a_queued_run_gets_409(client, run, alice):
    response = post(client, alice, f"/api/v1/runs/{run.id}/resume")

    assert response.status_code == 409
    assert "only failed or cancelled" in response.json()["error"]


def test_the_owner_finishes_an_external_run(client, experiment, alice):
    run = Run.objects.create(experiment=experiment, name="ext", external=True, status=Run.RUNNING)

    response = post(
        client, alice, f"/api/v1/runs/{run.id}/finish", {"status": "failed", "error": "OOM"}
    )

    assert response.status_code == 200
    run.refresh_from_db()
    assert (run.status, run.error_type, run.error_message) == ("failed", "ExternalError", "OOM")
    assert (
        post(client, alice, f"/api/v1/runs/{run.id}/finish", {"status": "failed"}).status_code
        == 409
    )


def test_finishing_needs_a_final_status(client, experiment, alice):
    run = Run.objects.create(experiment=experiment, name="ext", external=True, status=Run.RUNNING)

    response = post(client, alice, f"/api/v1/runs/{run.id}/finish", {"status": "done"})

    assert response.status_code == 400
    assert response.json()["fields"] == {"status": "one of succeeded, failed"}


def test_a_run_trained_here_is_not_finished_through_the_api(client, run, alice):
    assert (
        post(client, alice, f"/api/v1/runs/{run.id}/finish", {"status": "succeeded"}).status_code
        == 409
    )


def test_an_external_run_does_not_resume(client, experiment, alice):
    run = Run.objects.create(experiment=experiment, name="ext", external=True, status=Run.FAILED)

    assert post(client, alice, f"/api/v1/runs/{run.id}/resume").status_code == 409


def test_the_teammate_may_not_delete_a_run(client, run, bob):
    assert client.delete(f"/api/v1/runs/{run.id}", headers=bearer(bob)).status_code == 403
    assert Run.objects.filter(id=run.id).exists()


def test_the_owner_deletes_a_finished_run_but_not_a_running_one(client, run, alice):
    Run.objects.filter(id=run.id).update(status=Run.RUNNING)
    assert client.delete(f"/api/v1/runs/{run.id}", headers=bearer(alice)).status_code == 409

    Run.objects.filter(id=run.id).update(status=Run.CANCELLED)
    response = client.delete(f"/api/v1/runs/{run.id}", headers=bearer(alice))

    assert response.json() == {"deleted": run.id}
    assert not Run.objects.filter(id=run.id).exists()


def test_deleting_a_run_or_its_experiment_deletes_its_points(client, alice):
    # The points table keeps no foreign key in the database (it would check the run on every
    # row a batch inserts), so the deletes must take the points with them.
    experiment = make_experiment(alice, runs=2)
    first, second = experiment.runs.order_by("id")
    for run in (first, second):
        write_points(run.id, [("eval/accuracy", step, 0.5) for step in range(3)])
    Run.objects.filter(experiment=experiment).update(status=Run.SUCCEEDED)

    assert client.delete(f"/api/v1/runs/{first.id}", headers=bearer(alice)).status_code == 200
    assert list(MetricPoint.objects.values_list("run_id", flat=True).distinct()) == [second.id]

    response = client.delete(f"/api/v1/experiments/{experiment.id}", headers=bearer(alice))
    assert response.status_code == 200
    assert not MetricPoint.objects.exists()
