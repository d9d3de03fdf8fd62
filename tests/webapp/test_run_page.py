"""The run page: config, status, progress, latest metrics with sparklines, log tail, and the
cancel, resume and clone actions for who may use them; and the JSON it polls."""

import re
from pathlib import Path

import pytest
from django.utils import timezone

from tests.branches import give_checkpoints
from tests.webapp.test_alerts import accuracy_points
from webapp.alerts.radar import evaluate_radar
from webapp.experiments.models import Run, RunLog
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


@pytest.fixture
def trained(run):
    """A run at step 3 of 30 with accuracy and reward series and two log lines."""
    Run.objects.filter(id=run.id).update(status=Run.RUNNING, step=3, worker="cpu@node1")
    points = [("eval/accuracy", 0, 0.25), ("eval/accuracy", 2, 0.5)]
    points += [("train/reward", s, 0.1 * s) for s in (1, 2, 3)]
    points += [("role/solver/grad_norm", 3, 1.5)]
    write_points(run.id, points)
    RunLog.objects.create(run=run, line="Worker cpu@node1 took the run (attempt 1), starting.")
    RunLog.objects.create(run=run, line="step 3/30 · reward 0.300 · 1.2 s")
    run.refresh_from_db()
    return run


def test_an_outsider_is_sent_to_sign_in(client, run):
    assert client.get(f"/runs/{run.id}/").status_code == 302
    assert client.get(f"/runs/{run.id}/live.json").status_code == 302


def test_the_teammate_sees_status_progress_config_metrics_and_log(client, trained, bob):
    client.force_login(bob)

    html = client.get(f"/runs/{trained.id}/").content.decode()

    assert "badge status-running" in html and "step 3 of 30" in html
    assert 'style="width: 10%"' in html
    assert "cpu@node1" in html
    assert "<code>role/solver/grad_norm</code>" in html and "1.5000" in html
    assert html.count("<polyline") == 2 and 'data-spark="eval/accuracy"' in html
    assert 'data-spark="train/reward"' in html
    assert "step 3/30 · reward 0.300" in html
    assert "<dt>lora_r</dt><dd><code>8</code>" in html  # the config, grouped
    assert "run_page.js" in html


def test_key_results_show_base_and_peak(client, trained, bob):
    client.force_login(bob)

    html = client.get(f"/runs/{trained.id}/").content.decode()

    assert "<dt>base</dt><dd>0.250</dd>" in html
    assert "0.500" in html and "@2" in html


def test_a_run_without_metrics_says_so(client, run, bob):
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert "No metrics yet." in html and "No evaluation yet" in html


def test_live_json_carries_what_the_page_updates(client, trained, bob):
    client.force_login(bob)

    data = client.get(f"/runs/{trained.id}/live.json").json()

    assert data["run"]["status"] == "running" and data["run"]["progress"] == 0.1
    assert data["latest"]["train/reward"] == {"step": 3, "value": pytest.approx(0.3)}
    sparks = {s["key"]: s for s in data["sparklines"]}
    assert sparks["eval/accuracy"]["steps"] == [0, 2] and sparks["eval/accuracy"]["last"] == 0.5
    assert [e["line"] for e in data["logs"]][-1] == "step 3/30 · reward 0.300 · 1.2 s"


def test_every_block_of_the_live_page_follows_the_run(client, trained, alice, tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    client.force_login(alice)
    before = client.get(f"/runs/{trained.id}/live.json").json()["blocks"]
    assert "best-" not in before["lineage"]  # nothing to branch from yet
    assert "No events so far" in before["radar"]

    # The run trains on: a collapse to 0 (with the standard errors a Troupe run logs beside
    # each evaluation), a checkpoint, a heartbeat, a second attempt.
    write_points(trained.id, [("eval/accuracy", s, 0.0) for s in (4, 6, 8, 10, 12, 14, 16)])
    write_points(trained.id, [("eval/accuracy_se", s, 0.05) for s in range(0, 17, 2)])
    write_points(trained.id, [("ckpt/best_step", 16, 2), ("ckpt/best_accuracy", 16, 0.5)])
    evaluate_radar(trained.id)  # the radar worker's task, as the write queued it
    give_checkpoints(trained, tmp_path / "out", best=2, steps=(14,))
    Run.objects.filter(id=trained.id).update(
        status=Run.RUNNING,
        step=16,
        attempts=2,
        checkpoint_step=14,
        heartbeat=timezone.now().replace(hour=12, minute=34, second=56),
    )
    after = client.get(f"/runs/{trained.id}/live.json").json()["blocks"]

    final = re.search(r"<dt>final</dt><dd>([0-9.]+)</dd>", after["results"]).group(1)
    assert float(final) < 0.1  # not the 0.375 of the first two evaluations
    assert "@4" in after["results"] and "@4" not in before["results"]  # the cliff's onset
    assert "<dt>Attempts</dt><dd>2</dd>" in after["facts"]
    assert "step 14" in after["facts"] and "12:34:56" in after["facts"]
    assert 'value="best-000002"' in after["lineage"] and 'value="step-000014"' in after["lineage"]
    assert 'data-alert-kind="cliff"' in after["radar"]
    assert "Best checkpoint: step <strong>2</strong>" in after["radar"]


WARM_START = "Preparing model tiny-s: warm start 40%"


def test_a_run_preparing_its_model_says_so_on_its_page_and_in_its_json(client, run, bob):
    Run.objects.filter(id=run.id).update(status=Run.RUNNING, phase=WARM_START)
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()
    data = client.get(f"/runs/{run.id}/live.json").json()
    experiment = client.get(f"/experiments/{run.experiment_id}/live.json").json()

    assert f'<span class="phase" data-phase>{WARM_START}</span>' in html
    assert data["run"]["phase"] == WARM_START
    assert experiment["runs"][0]["phase"] == WARM_START


@pytest.mark.parametrize("status", [Run.QUEUED, Run.FAILED, Run.CANCELLED])
def test_only_a_running_run_shows_a_phase(client, run, bob, status):
    Run.objects.filter(id=run.id).update(status=status, phase=WARM_START)
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert WARM_START not in html and "data-phase hidden" in html
    assert client.get(f"/runs/{run.id}/live.json").json()["run"]["phase"] == ""


def test_the_teammate_sees_no_cancel_and_may_not_post_it(client, trained, bob):
    client.force_login(bob)

    assert 'id="cancel-run"' not in client.get(f"/runs/{trained.id}/").content.decode()
    assert client.post(f"/runs/{trained.id}/cancel/").status_code == 403
    trained.refresh_from_db()
    assert not trained.cancel_requested


def test_the_owner_cancels_a_running_run(client, trained, alice):
    client.force_login(alice)
    assert 'id="cancel-run"' in client.get(f"/runs/{trained.id}/").content.decode()

    response = client.post(f"/runs/{trained.id}/cancel/", follow=True)

    assert "stops after its current step" in response.content.decode()
    trained.refresh_from_db()
    assert trained.cancel_requested and trained.status == Run.RUNNING


def test_the_teammate_may_not_resume(client, run, bob):
    Run.objects.filter(id=run.id).update(status=Run.FAILED)
    client.force_login(bob)

    assert client.post(f"/runs/{run.id}/resume/").status_code == 403


def test_the_owner_sees_resume_after_a_failure(client, run, alice):
    Run.objects.filter(id=run.id).update(
        status=Run.FAILED,
        error_type="RuntimeError",
        error_message="out of memory",
        error_traceback="Traceback (most recent call last): …",
        checkpoint_step=20,  # before its first checkpoint, a resume would run out again
    )
    client.force_login(alice)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="resume-run"' in html
    assert "<strong>RuntimeError</strong>: out of memory" in html
    assert "Traceback (most recent call last)" in html


def test_a_run_whose_model_cannot_load_offers_no_resume(client, run, alice):
    Run.objects.filter(id=run.id).update(
        status=Run.FAILED, error_type="ModelUnavailable", error_message="no such model"
    )
    client.force_login(alice)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="resume-run"' not in html and "A resume would fail the same way" in html
    client.post(f"/runs/{run.id}/resume/")
    run.refresh_from_db()
    assert run.status == Run.FAILED
    api = client.post(f"/api/v1/runs/{run.id}/resume")
    assert api.status_code == 409 and "ModelUnavailable" in api.json()["error"]


def test_an_older_run_naming_a_file_outside_the_folders_offers_no_resume(
    client, run, alice, settings, tmp_path
):
    """Queued before paths were checked: the worker refuses it, so a resume would too."""
    settings.DATA_DIR = tmp_path
    config = {**run.config, "dataset": str(tmp_path / "runs" / "3" / "artifacts" / "d.jsonl")}
    Run.objects.filter(id=run.id).update(
        status=Run.FAILED, error_type="ValueError", error_message="…", config=config
    )
    client.force_login(alice)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="resume-run"' not in html
    assert "not in the server&#x27;s dataset folder" in html


def test_resuming_a_succeeded_run_is_refused_with_a_message(client, run, alice):
    Run.objects.filter(id=run.id).update(status=Run.SUCCEEDED)
    client.force_login(alice)

    response = client.post(f"/runs/{run.id}/resume/", follow=True)

    assert "Only failed or cancelled runs" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED


def test_it_links_to_clone_and_to_the_panel(client, run, bob):
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert f'href="/experiments/new/?run={run.id}"' in html
    assert f'href="/dash/compare?runs={run.id}&amp;key=eval/accuracy"' in html
    assert f'href="/dash/gradients?runs={run.id}"' in html


def test_an_unknown_run_is_a_404_page(client, bob):
    client.force_login(bob)

    assert client.get("/runs/777777/").status_code == 404


def test_the_radar_explains_value_and_limit_and_numbers_align_with_their_headings(client, run, bob):
    write_points(run.id, [(p["key"], p["step"], p["value"]) for p in accuracy_points()])
    evaluate_radar(run.id)  # the radar worker's task, as the write queued it
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()

    start = html.index("data-radar-legend")
    legend = html[start : html.index("</p>", start)]
    assert "hidden" not in legend.split(">")[0]  # shown: the run has events
    assert "<strong>Value</strong> is the metric at the event's step" in legend
    assert "peak − θ" in legend
    css = (Path(__file__).parents[2] / "webapp/static/troupe.css").read_text()
    # `.table td { text-align: left }` outranks a bare `.num`: the number cells need a rule
    # as specific as their headings', or they sit left under right-aligned headings.
    assert ".table td.num" in css and ".table th.num, .table td.num { text-align: right; }" in css
