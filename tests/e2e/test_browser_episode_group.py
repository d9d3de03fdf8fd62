"""A GRPO group of 8 samples on the step page at 1360 px: every card shows inside the group's
row (they wrap, none hides behind a scroll bar), and a share that rounds to 0 reads "0%",
never "-0%". In a real browser (the system's Chromium) against gunicorn on the test database.
"""

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot, sign_in
from tests.live_server import live_troupe
from tests.webapp.episode_records import voting_step
from webapp.episodes import store
from webapp.experiments.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

PASSWORD = "correct horse battery"
CLIPPED_JS = """() => [...document.querySelectorAll('#groups .ep-strip')].flatMap(strip => {
    const edge = strip.getBoundingClientRect().right;
    return [...strip.querySelectorAll('.ep-card')]
        .filter(card => card.getBoundingClientRect().right > edge + 0.5)
        .map(card => card.dataset.sample);
})"""


@pytest.fixture
def served(alice, run, tmp_path):
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    Run.objects.filter(id=run.id).update(status=Run.SUCCEEDED, step=1)
    records = voting_step("train", 1, problems=1, group=8)
    records[0]["grad_share"] = {"aggregator": -0.0004}  # a float a hair below 0
    store.write_episodes(run.id, records)
    with live_troupe(tmp_path) as base:
        yield base, run.id


def test_a_group_of_eight_shows_every_sample_and_no_negative_zero(served, chromium_path):
    base, run_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        sign_in(page, f"{base}/runs/{run_id}/episodes/?kind=train&step=1", "alice", PASSWORD)
        expect(page.locator("#groups .ep-card")).to_have_count(8)
        assert page.evaluate(CLIPPED_JS) == []  # no sample past its row's edge
        groups = page.locator("#groups")
        expect(groups).not_to_contain_text("-0%")
        expect(groups).to_contain_text("carried 0% of the aggregator's gradient")
        screenshot(page, "episodes-group-of-eight.png")
