"""What the browser tests share: the system's Chromium launched headless by Playwright, and
screenshots saved to artifacts/ for a person to look at.

Playwright's sync API runs an event loop in the test's thread, and Django refuses ORM calls
while one runs: tests set up their database rows in fixtures listed before the browser's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

from tests.helpers import ROOT

ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium(executable_path: str) -> Iterator[Browser]:
    """The system's Chromium (never a downloaded one), closed on exit."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable_path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page, name: str) -> Path:
    """The whole page, saved as artifacts/<name>."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=path, full_page=True)
    assert path.stat().st_size > 0
    return path


def sign_in(page, url: str, username: str, password: str) -> None:
    """Open `url` and sign in on the login page it sends a stranger to."""
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-form button[type=submit]")
