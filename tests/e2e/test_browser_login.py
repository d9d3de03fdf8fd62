"""A real browser (the system's Chromium, driven by Playwright) signs in through the login page
of a live server. Later browser tests follow this one."""

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.helpers import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "artifacts"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def browser_page(chromium_path):
    """A Chromium page; the browser closes after the test.

    Playwright's sync API runs an event loop in this thread, and Django refuses ORM calls
    while one runs: set up database rows in fixtures listed before this one.
    """
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 800})
        finally:
            browser.close()


def test_a_user_signs_in_through_the_login_page(live_server, alice, browser_page):
    page = browser_page

    page.goto(f"{live_server.url}/")
    assert page.url == f"{live_server.url}/accounts/login/?next=/"
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse battery")
    page.click("#login-form button[type=submit]")

    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("h1").inner_text() == "Experiments"
    assert page.locator("nav").get_by_text("Sign out").is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = Path(ARTIFACTS / "browser-login.png")
    page.screenshot(path=screenshot, full_page=True)
    assert screenshot.stat().st_size > 0
