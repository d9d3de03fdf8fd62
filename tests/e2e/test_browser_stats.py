"""The statistics page in a real browser (the system's Chromium through Playwright), against
gunicorn on the test database: the owner reads the verdicts of an experiment with one
undecided cell and one clear one, presses "queue more seeds" and finds the new runs queued
on the experiment page."""

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.live_server import live_troupe
from tests.stats_runs import sharing_pairs
from webapp.experiments.models import Experiment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"


@pytest.fixture
def served(alice, tmp_path, monkeypatch):
    """Two cells: voting with no effect (16 more seeds wanted), single with a clear one whose
    shared runs fall off a cliff after amplification. Rows and the password are set before
    the browser starts (Django refuses ORM calls inside Playwright's loop); DEBUG lets
    WhiteNoise serve stats.css from the source tree."""
    monkeypatch.setenv("DEBUG", "1")
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    experiment = Experiment.objects.create(owner=alice, name="Sharing study", preset="cpu-demo")
    sharing_pairs(experiment, [0.08, -0.02, 0.06, 0.0], workflow="voting")
    sharing_pairs(experiment, [0.2, 0.22, 0.19, 0.21], workflow="single", shared_cliff=True)
    with live_troupe(tmp_path) as base:
        yield base, experiment.id


def test_the_owner_reads_the_verdicts_and_queues_the_missing_seeds(served, chromium_path):
    base, experiment_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/experiments/{experiment_id}/")  # the login page, then the experiment
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.click("text=Statistics")

        expect(page.locator("h1")).to_have_text("Statistics across seeds")
        expect(page.locator('[data-verdict="lead"]')).to_have_text(
            "Among 4 runs with a cliff, amplification preceded it in 4 (median lead 15 steps); "
            "placing onsets at random steps gives this or more 2.6% of the time: amplification "
            "tends to come first."
        )
        expect(page.locator('[data-verdict="sharing"]')).to_contain_text(
            "Undecided in 1 of 2 cells (on peak accuracy, final accuracy): resolving them takes "
            "about 16 more seeds (32 runs)."
        )
        # One cell decided, one not: they disagree, so no pooled figure.
        expect(page.locator('[data-verdict="sharing"]')).to_contain_text(
            "cells disagree: see each cell"
        )
        voting = page.locator('tr[data-cell="voting/math/tiny-s"]')
        expect(voting).to_have_class("undecided")
        expect(voting.locator("[data-plan]")).to_contain_text("16")
        single = page.locator('tr[data-cell="single/math/tiny-s"]')
        expect(single).to_contain_text("per_role higher")
        screenshot(page, "stats-before.png")

        page.click("#queue-seeds button")

        expect(page.locator(".message")).to_contain_text(
            "Queued 32 runs (both sharing modes) — voting × math × tiny-s: seeds 4–19."
        )
        expect(voting.locator("[data-plan]")).to_contain_text("16 on the way")
        screenshot(page, "stats-queued.png")

        page.click(".crumbs a >> nth=1")  # back to the experiment
        expect(page.locator('[data-count="queued"]')).to_have_text("32")
        expect(page.locator("th.seed", has_text="seed 19")).to_have_count(1)
