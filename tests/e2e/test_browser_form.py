"""The new-experiment form's script in a real browser (the system's Chromium through
Playwright), against gunicorn on the test database: models typed under "other models"
replace the preset's ticked model, and switching preset keeps the name typed so far."""

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium
from tests.live_server import live_troupe

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"


@pytest.fixture
def served(alice, tmp_path, monkeypatch):
    """A live server and alice's password (set before the browser starts: Django refuses ORM
    calls inside Playwright's loop); DEBUG serves the scripts from the source tree."""
    monkeypatch.setenv("DEBUG", "1")
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    with live_troupe(tmp_path) as base:
        yield base


@pytest.fixture
def form(served, chromium_path):
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{served}/experiments/new/?preset=cpu-demo")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#experiment-form")
        yield page


def test_typed_models_replace_the_presets_model_unless_models_were_ticked(form):
    tiny_s = form.locator('input[name="model"][value="tiny-s"]')
    expect(tiny_s).to_be_checked()

    form.fill("#id_other_models", "/models/a, /models/b")
    expect(tiny_s).not_to_be_checked()
    expect(form.locator("[data-run-count]").first).to_have_text("2 runs")
    form.fill("#id_other_models", "")
    expect(tiny_s).to_be_checked()  # nothing typed: the preset's model again

    tiny_s.uncheck()
    tiny_s.check()  # a choice of the user's own: typing no longer changes it
    form.fill("#id_other_models", "/models/a")
    expect(tiny_s).to_be_checked()


def test_switching_preset_keeps_the_name_typed_so_far(form):
    form.fill("#id_name", "Voting at scale")

    form.click(".segmented >> text=paper")

    form.wait_for_url("**preset=paper**")
    expect(form.locator("#id_name")).to_have_value("Voting at scale")
    expect(form.locator('input[name="preset"]')).to_have_value("paper")
