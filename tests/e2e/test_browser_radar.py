"""The run page's Radar panel in a real browser (the system's Chromium through Playwright),
against gunicorn and a radar worker on the test database: points written through the API
while the page is open show up as a confirmed cliff and a best checkpoint without a reload."""

import json
import urllib.request

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.helpers import database_url, service_env, start_radar_worker
from tests.live_server import live_troupe
from tests.webapp.test_alerts import accuracy_points
from webapp.experiments.models import ApiToken

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
BEST = [
    {"key": "ckpt/best_step", "step": 90, "value": 30},
    {"key": "ckpt/best_accuracy", "step": 90, "value": 0.7},
]


@pytest.fixture
def served(alice, run, tmp_path, monkeypatch):
    """A live server, alice's password and token (set before the browser starts: Django
    refuses ORM calls inside Playwright's loop). DEBUG lets WhiteNoise serve the page's
    scripts from the source tree: a checkout has no collected static files."""
    monkeypatch.setenv("DEBUG", "1")
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    _, token = ApiToken.issue(alice, "radar")
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    with start_radar_worker(env), live_troupe(tmp_path) as base:
        yield base, token, run.id


def post_points(base: str, token: str, run_id: int, points: list[dict]) -> None:
    request = urllib.request.Request(
        f"{base}/api/v1/runs/{run_id}/metrics",
        data=json.dumps({"points": points}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def test_the_radar_panel_shows_a_cliff_as_it_is_confirmed(served, chromium_path):
    base, token, run_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/runs/{run_id}/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        panel = page.locator("#radar")
        expect(panel.locator("[data-radar-empty]")).to_be_visible()

        post_points(base, token, run_id, accuracy_points() + BEST)

        row = panel.locator('tr[data-alert-kind="cliff"]')
        expect(row).to_be_visible(timeout=20_000)
        expect(row).to_contain_text("confirmed @90")
        expect(row.locator("td").nth(2)).to_have_text("50")
        expect(panel.locator("[data-best]")).to_have_text(
            "Best checkpoint: step 30, accuracy 0.700"
        )
        expect(panel.locator("[data-radar-empty]")).to_be_hidden()
        screenshot(page, "run-radar.png")


def test_the_experiment_page_shows_a_runs_worst_event_as_it_happens(served, chromium_path):
    base, token, run_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/runs/{run_id}/")  # the login page, then the run's page
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.click(".crumbs a >> nth=1")  # its experiment
        cell = page.locator(f'tr[data-run-id="{run_id}"] [data-radar]')
        expect(cell).to_have_text("—")

        post_points(base, token, run_id, accuracy_points(upto=70))

        expect(cell).to_have_text("cliff @50 1", timeout=20_000)
        expect(cell.locator(".badge")).to_have_class("badge status-queued")  # provisional
        post_points(base, token, run_id, accuracy_points()[8:])
        expect(cell.locator(".badge")).to_have_class("badge status-failed", timeout=20_000)
