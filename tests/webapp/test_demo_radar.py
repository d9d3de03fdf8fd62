"""The demo experiment agrees with itself: the radar has judged its runs, so the alerts name
the cliff and the capture its key results name; and it says its data is synthetic."""

import pytest

from analysis.runs import RunSummary
from webapp.demo.build import SYNTHETIC, build_demo_experiment
from webapp.experiments.models import Alert
from webapp.runs.summaries import clear_cache, run_summaries

pytestmark = pytest.mark.django_db


def test_the_demo_has_the_alerts_its_key_results_name_and_says_it_is_synthetic(alice, client):
    clear_cache()
    demo = build_demo_experiment(alice, runs=2, steps=120)
    summaries = run_summaries([demo.cliff_run, demo.capture_run])
    cliff = RunSummary.of(summaries[demo.cliff_run.id]).accuracy
    assert cliff.label == f"cliff @{demo.cliff_onset}"
    capture = RunSummary.of(summaries[demo.capture_run.id])
    assert capture.capture == demo.capturing_role

    alerts = set(Alert.objects.values_list("run_id", "kind", "role", "step", "provisional"))
    assert (demo.cliff_run.id, "cliff", "", demo.cliff_onset, False) in alerts
    assert any(
        (run, kind, role) == (demo.capture_run.id, "capture", demo.capturing_role)
        for run, kind, role, _step, _provisional in alerts
    )
    assert demo.experiment.preset == SYNTHETIC == "synthetic"
    client.force_login(alice)
    listed = client.get("/experiments/").content.decode()
    assert '<span class="tag">synthetic</span>' in listed
    run_page = client.get(f"/runs/{demo.cliff_run.id}/").content.decode()
    assert 'data-alert-kind="cliff"' in run_page
    clear_cache()
