"""In a real browser (the system's Chromium, driven by Playwright), against a live server and
a real worker: sign in, design a 2 × 2 matrix on the cpu-demo preset with small step counts,
queue it, watch its runs finish on the experiment page, and open a run's page. Screenshots
of the three pages go to artifacts/."""

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.helpers import database_url, service_env, start_worker
from tests.runs import SMALL

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),
]

PASSWORD = "correct horse battery"


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create_user("dana", password=PASSWORD)


@pytest.fixture
def worker(tiny_model, transactional_db):
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
    )
    with start_worker(env) as started:
        yield started


@pytest.fixture
def page(chromium_path, live_server, dana, worker):
    """A signed-in Chromium page. Playwright's sync API runs an event loop in this thread and
    Django refuses ORM calls while one runs: database rows come from the fixtures above."""
    with chromium(chromium_path) as browser:
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", "dana")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        yield page


def test_a_researcher_queues_a_matrix_and_watches_it_train(page, live_server, worker):
    page.click("nav >> text=Experiments")
    page.click("text=New experiment")
    page.click(".segmented >> text=cpu-demo")
    expect(page.locator("[data-run-count]").first).to_have_text("1 run")

    page.fill("#id_name", "Sharing on the tiny model")
    page.fill("#id_description", "Shared vs per-role policies, two seeds, a few steps each.")
    page.check("input[name=sharing][value=per_role]")
    page.fill("#id_seeds", "0, 1")
    expect(page.locator("[data-run-count]").first).to_have_text("4 runs")
    for name, value in SMALL.items():
        page.fill(f"#id_{name}", str(value))
    screenshot(page, "experiment-new.png")

    page.click("button[type=submit] >> text=Queue")
    page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
    expect(page.locator(".message")).to_have_text("Queued 4 runs.")
    expect(page.locator(".run-cell")).to_have_count(4)

    # The page follows the runs by itself (and reloads as each finishes).
    expect(page.locator(".run-cell .status-succeeded")).to_have_count(4, timeout=600_000)
    expect(page.locator(".matrix td.num.strong").first).not_to_have_text("—")
    screenshot(page, "experiment-detail.png")

    page.locator(".run-cell").first.click()
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    expect(page.locator("#run-live [data-status]")).to_have_text("succeeded")
    expect(page.locator("[data-latest] .metric").first).to_be_visible()
    points = page.locator('[data-spark="eval/accuracy"] polyline').get_attribute("points")
    assert len(points.split()) == 3  # evaluations at steps 0, 2 and 4
    expect(page.locator("[data-log]")).to_contain_text("Finished at step 4")
    screenshot(page, "run-detail.png")
