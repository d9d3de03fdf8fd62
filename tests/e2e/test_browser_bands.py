"""The seed-bands view in a real browser (the system's Chromium through Playwright) against
gunicorn on the test database: an experiment of 3 seeds × 2 sharing modes, opened grouped by
seed (three bands of two runs), switched to group by sharing mode (two bands of three runs,
the per_role band well above the shared one), and its run table sorted by peak both ways.
"""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.live_server import live_troupe
from tests.stats_runs import flat, stored_run
from webapp.experiments.models import Experiment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
PEAKS = {"shared": [0.5, 0.52, 0.48], "per_role": [0.7, 0.72, 0.68]}
SHOTS = Path(os.environ.get("TROUPE_SHOTS", "")) if os.environ.get("TROUPE_SHOTS") else None

BANDS_JS = """() => {
    const gd = document.querySelector('#bands-graph .js-plotly-plot');
    if (!gd || !gd.data) return null;
    const means = gd.data.filter(t => t.fill !== 'toself').map(t => t.name);
    return {bands: gd.data.filter(t => t.fill === 'toself').length, means: means};
}"""


@pytest.fixture
def served(alice, tmp_path):
    """The experiment's six finished runs, stored before the browser starts (Django refuses
    ORM calls inside Playwright's loop); the server's base URL and the experiment's id."""
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    experiment = Experiment.objects.create(owner=alice, name="Seeds study", preset="cpu-demo")
    runs = {}
    for sharing, peaks in PEAKS.items():
        for seed, peak in enumerate(peaks):
            runs[(sharing, seed)] = stored_run(
                experiment, seed=seed, sharing=sharing, accuracy=flat(peak)
            ).id
    with live_troupe(tmp_path) as base:
        yield base, experiment.id, runs


def _bands(page, count: int) -> dict:
    page.wait_for_function(
        f"() => {{ const r = ({BANDS_JS})(); return r && r.bands === {count}; }}"
    )
    return page.evaluate(BANDS_JS)


def _peaks_in_table(page) -> list[str]:
    column = page.locator("#bands-table thead th").all_inner_texts()
    index = next(
        i for i, text in enumerate(column) if text.startswith("Peak") and "step" not in text
    )
    return page.locator(f"#bands-table tbody tr td:nth-child({index + 1})").all_inner_texts()


def test_group_by_switches_the_bands_and_the_table_sorts(served, chromium_path):
    base, experiment_id, runs = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 1000}).new_page()
        page.goto(f"{base}/dash/bands?experiment={experiment_id}&by=seed")  # login, then back
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")

        expect(page.locator("h1")).to_have_text("Seed bands")
        by_seed = _bands(page, 3)
        assert by_seed["means"] == [f"seed = {s} (2 runs)" for s in (0, 1, 2)]

        page.locator("#bands-by").click()
        page.get_by_role("option", name="sharing (differs)").click()

        by_sharing = _bands(page, 2)
        assert by_sharing["means"] == ["sharing = per_role (3 runs)", "sharing = shared (3 runs)"]
        # The default grouping (the whole cell) stays out of the address; sharing does not.
        selected = ",".join(map(str, sorted(runs.values())))
        expect(page).to_have_url(f"{base}/dash/bands?runs={selected}&key=eval/accuracy&by=sharing")

        # The table, in run order, then by peak: lowest first, then highest first.
        expect(page.locator("#bands-table tbody tr")).to_have_count(6)
        page.locator("#bands-table th button", has_text="Peak").first.click()
        expect(page.locator("#bands-table th[aria-sort=ascending]")).to_have_text("Peak ▲")
        assert _peaks_in_table(page) == ["0.480", "0.500", "0.520", "0.680", "0.700", "0.720"]
        page.locator("#bands-table th button", has_text="Peak").first.click()
        expect(page.locator("#bands-table th[aria-sort=descending]")).to_have_text("Peak ▼")
        assert _peaks_in_table(page) == ["0.720", "0.700", "0.680", "0.520", "0.500", "0.480"]
        # The address follows the table a moment after it redraws: wait for it, do not read it.
        expect(page).to_have_url(re.compile(r"[?&]sort=-peak(&|$)"))

        path = screenshot(page, "seed-bands.png")
        if SHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            (SHOTS / path.name).write_bytes(path.read_bytes())
