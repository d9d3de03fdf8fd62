"""The run page's attribution panel in a real browser, against gunicorn and a real worker: a
cpu-demo voting per_role run with a frozen aggregator is trained, the page shows what
"Attribute this run's gain" costs before anything is queued, the click queues it, the worker
evaluates, and the page draws each role's share (the frozen aggregator's exactly 0) with the
table of every combination's accuracy; the panel's attribution page then shows the cell."""

import time

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot, sign_in
from tests.helpers import database_url, service_env, start_worker
from tests.live_server import live_troupe
from tests.runs import SMALL, run_in, wait_for
from webapp.experiments.models import Run
from webapp.runs.queueing import create_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

PASSWORD = "correct horse battery"
CONFIG = {**SMALL, "workflow": "voting", "sharing": "per_role", "frozen_roles": "aggregator"}


@pytest.fixture
def served(alice, tmp_path, monkeypatch, tiny_model):
    """A trained run, a worker and a live server (the ORM is used before the browser starts:
    Django refuses it inside Playwright's loop)."""
    monkeypatch.setenv("DEBUG", "1")
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    run = create_experiment(alice, "attribution", preset="cpu-demo", config=CONFIG).runs.get()
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    with start_worker(env), live_troupe(tmp_path) as base:
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the run")
        assert done.status == Run.SUCCEEDED, done.error_message
        yield base, run.id, run.experiment_id


def test_the_run_page_attributes_the_gain_to_its_roles(served, chromium_path):
    base, run_id, experiment_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        sign_in(page, f"{base}/runs/{run_id}/", "alice", PASSWORD)
        panel = page.locator("#attribution")
        expect(panel.locator('[data-plan="gain"] [data-cost]')).to_contain_text(
            "final − base: 4 evaluations (2 to run, the rest the run's own)"
        )
        panel.locator("#attribute-gain").click()
        expect(page.locator(".messages")).to_contain_text("Queued swap job")
        deadline = time.monotonic() + 180
        result = panel.locator("#attribution-result")
        while result.count() == 0 and time.monotonic() < deadline:
            time.sleep(2)
            page.reload()
        expect(result.locator('[data-role="aggregator"]')).to_have_attribute("data-value", "0.0")
        expect(result.locator('[data-role="generator"]')).to_contain_text("[")
        expect(panel.locator("tr[data-combination]")).to_have_count(4)
        expect(panel.locator('tr[data-combination="-"]')).to_contain_text(
            "the run's own evaluation of step 0"
        )
        whole = screenshot(page, "run-attribution.png")
        panel.screenshot(path=whole.with_name("run-attribution-panel.png"))  # the part to look at

        panel.locator("#attribution-matrix").click()  # the panel: the experiment's matrix
        expect(page).to_have_url(f"{base}/dash/attribution?experiment={experiment_id}")
        table = page.locator("#attribution-table")
        expect(table).to_contain_text("1 of 1")
        # the frozen aggregator took none of the gradient
        expect(table.locator("tr", has_text="aggregator")).to_contain_text("0%")
        expect(page.locator("#attribution-graph .legend")).to_contain_text("aggregator")
        screenshot(page, "dash-attribution.png")
