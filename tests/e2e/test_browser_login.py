"""A real browser (the system's Chromium, driven by Playwright) signs in through the login page
of a live server. Later browser tests follow this one."""

import pytest

from tests.e2e.browser import chromium, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def browser_page(chromium_path):
    """A Chromium page; the browser closes after the test."""
    with chromium(chromium_path) as browser:
        yield browser.new_page(viewport={"width": 1280, "height": 800})


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
    screenshot(page, "browser-login.png")
