"""A run of unknown length in a real browser: an MLflow run logged step by step has no
`total_steps`, and its run page — the server's HTML and what its script writes from
live.json as new steps arrive — reads "step N", never "step N of 0"; the experiment page's
row reads "N", never "N/0"."""

import re

import mlflow
import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, sign_in
from tests.live_server import mlflow_at_troupe
from webapp.experiments.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

PASSWORD = "correct horse battery"


@pytest.fixture
def open_run(alice, tmp_path, monkeypatch):
    with mlflow_at_troupe(alice, tmp_path, monkeypatch, PASSWORD) as base:
        mlflow.set_experiment("no length")
        with mlflow.start_run(run_name="open-ended") as active:
            for step in range(5):
                mlflow.log_metrics({"reward": 0.1 * step}, step=step)
            tags = mlflow.MlflowClient().get_run(active.info.run_id).data.tags
            run = Run.objects.get(id=int(tags["troupe.run_id"]))
            Run.objects.filter(id=run.id).update(step=4)  # as its tracking store keeps it
            yield base, run


def test_a_run_of_unknown_length_reads_step_n_on_its_pages(open_run, chromium_path):
    base, run = open_run
    assert run.total_steps == 0
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        sign_in(page, f"{base}/runs/{run.id}/", "alice", PASSWORD)
        steps = page.locator("#run-live [data-steps]")
        expect(steps).to_have_text("step 4")
        # Its script rewrites the line from live.json every few seconds: still no "of 0".
        page.wait_for_timeout(6000)
        expect(steps).to_have_text(re.compile(r"^step \d+$"))

        page.goto(f"{base}/experiments/{run.experiment_id}/")
        row = page.locator(f'[data-run-id="{run.id}"] [data-steps]')
        expect(row).to_have_text(re.compile(r"^\d+$"))
