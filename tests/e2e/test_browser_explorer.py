"""The runs explorer in a real browser (the system's Chromium through Playwright) against
gunicorn on the test database: six finished runs (3 seeds × 2 sharing modes), searched with
`/` and MLflow's filter syntax, a column added with the chooser, sorted both ways and back
again with the back button, charted grouped by sharing mode, and brushed on the parallel
coordinates: fifty newer runs with no accuracy push the six onto page 2, and the brush cuts the
whole result (the count, the pages, the CSV) to the runs in range, found on page 2.
Screenshots go to artifacts/ and /tmp/explorer-shots/ for a person to look at."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.live_server import live_troupe
from tests.stats_runs import flat, stored_run
from webapp.experiments.models import Experiment
from webapp.explorer.models import RunTags

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

PASSWORD = "correct horse battery"
PEAKS = {"shared": [0.5, 0.52, 0.48], "per_role": [0.7, 0.72, 0.68]}
SHOTS = Path("/tmp/explorer-shots")
FILLER = 50  # one page
BRUSH_PEAK = """([lo, hi]) => {
    const gd = document.getElementById('explorer-parcoords');
    const k = gd.data[0].dimensions.findIndex(d => d.label === 'attributes.peak');
    // what a drag along the axis does: Plotly sets the range and fires plotly_restyle
    return window.Plotly.restyle(gd, {[`dimensions[${k}].constraintrange`]: [[lo, hi]]});
}"""
DRAWN = "() => document.getElementById('explorer-parcoords').data[0].dimensions[0].values.length"


@pytest.fixture
def served(alice, tmp_path):
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    experiment = Experiment.objects.create(owner=alice, name="Seeds study", preset="cpu-demo")
    runs = {}
    for sharing, peaks in PEAKS.items():
        for seed, peak in enumerate(peaks):
            run = stored_run(experiment, seed=seed, sharing=sharing, accuracy=flat(peak))
            runs[(sharing, seed)] = run.id
    RunTags.objects.create(run_id=runs[("per_role", 1)], tags={"note": "try a lower lr"})
    for i in range(FILLER):  # newer, so first: the six above land on page 2
        stored_run(experiment, seed=10 + i, sharing="shared", accuracy=None)
    with live_troupe(tmp_path) as base:
        yield base, runs


def _shot(page, name: str) -> None:
    path = screenshot(page, name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / name).write_bytes(path.read_bytes())


def _visible_runs(page) -> list[int]:
    rows = page.locator("#explorer-table tbody tr:not([hidden])")
    return [int(r.get_attribute("data-run")) for r in rows.all()]


def _search_and_columns(page, base, runs) -> None:
    # `/` is explorer.js's: the heading can show before the script has run (a loaded machine
    # fetches it late), and a key pressed before then is lost.
    page.wait_for_load_state("load")
    page.keyboard.press("/")
    expect(page.locator("#explorer-q")).to_be_focused()
    page.keyboard.type("sharing = 'per_role' and peak > 0.6")
    page.keyboard.press("Enter")
    expect(page.locator("#explorer-count")).to_have_text("3 runs")
    _shot(page, "explorer-search.png")
    page.locator("#explorer-chooser summary").click()
    page.select_option("#explorer-add-kind", "tags")
    page.fill("#explorer-add-name", "note")
    page.click("#explorer-add")
    page.click("#explorer-columns button[type=submit]")
    expect(page.locator('th[data-spec="tags.note"]')).to_be_visible()
    expect(page.locator("#explorer-table tbody")).to_contain_text("try a lower lr")
    # the viewer's own time zone, not the server's UTC
    first_time = page.locator("#explorer-table time").first
    expect(first_time).not_to_contain_text("UTC")


def _sort(page, runs) -> None:
    per_role = [runs[("per_role", s)] for s in range(3)]
    page.locator('th[data-spec="attributes.peak"] a').click()
    expect(page.locator('th[data-spec="attributes.peak"]')).to_contain_text("▼")
    descending = sorted(per_role, key=lambda i: -PEAKS["per_role"][per_role.index(i)])
    assert _visible_runs(page) == descending
    page.locator('th[data-spec="attributes.peak"] a').click()
    expect(page.locator('th[data-spec="attributes.peak"]')).to_contain_text("▲")
    assert _visible_runs(page) == descending[::-1]
    _shot(page, "explorer-sorted.png")
    page.go_back()  # the back button restores the table as it was
    expect(page.locator('th[data-spec="attributes.peak"]')).to_contain_text("▼")
    assert _visible_runs(page) == descending


def _brush(page, base, runs) -> None:
    page.goto(f"{base}/explore/?cols=attributes.run_name,attributes.sharing,attributes.peak")
    expect(page.locator("#explorer-count")).to_have_text(f"{6 + FILLER} runs")
    per_role = sorted(runs[("per_role", s)] for s in range(3))
    assert not set(per_role) & set(_visible_runs(page))  # they sit on page 2
    page.locator("#explorer-parcoords-box summary").click()
    page.fill("#parcoords-axes", "attributes.seed,attributes.sharing,attributes.peak")
    page.click("#parcoords-draw")
    page.wait_for_function(
        "() => { const g = document.getElementById('explorer-parcoords');"
        " return g && g.data && g.data[0].dimensions.length === 3; }"
    )
    assert page.evaluate(DRAWN) == 6 + FILLER  # every match, not the page's rows
    page.evaluate(BRUSH_PEAK, [0.6, 0.8])
    # the brush is in the URL and the server's filter: the whole result is cut
    expect(page.locator("#explorer-count")).to_have_text("3 runs")
    expect(page.locator(".pager")).to_contain_text("Page 1 of 1")
    assert sorted(_visible_runs(page)) == per_role
    assert "brush=" in page.url
    expect(page.locator("#explorer-brushed code")).to_contain_text("attributes.peak >= 0.6")
    csv_href = page.locator("#explorer-csv + a").get_attribute("href")
    body = page.request.get(base + csv_href).text()
    assert sorted(int(line.split(",")[0]) for line in body.splitlines()[1:]) == per_role
    # the plot is drawn again with the brushed range, over the unbrushed matches
    page.wait_for_function(
        "() => { const g = document.getElementById('explorer-parcoords');"
        " return g && g.data && g.data[0].dimensions[2].constraintrange; }"
    )
    assert page.evaluate(DRAWN) == 6 + FILLER
    _shot(page, "explorer-parcoords.png")
    page.go_back()
    expect(page.locator("#explorer-count")).to_have_text(f"{6 + FILLER} runs")
    page.go_forward()
    expect(page.locator("#explorer-count")).to_have_text("3 runs")
    page.click("#explorer-unbrush")
    expect(page.locator("#explorer-count")).to_have_text(f"{6 + FILLER} runs")


def _chart(page, base) -> None:
    page.goto(f"{base}/explore/?q=peak+%3E%3D+0")  # the six runs with an accuracy
    expect(page.locator("#explorer-count")).to_have_text("6 runs")
    page.check("#explorer-all")
    page.click("#explorer-chart-link")
    expect(page.locator("h1")).to_have_text("Chart")
    page.select_option("#chart-smooth", "ema-0.3")
    page.click("#chart-form button[type=submit]")
    page.wait_for_function(
        "() => { const g = document.getElementById('explorer-chart'); return g && g.data; }"
    )
    names = page.evaluate(
        "() => document.getElementById('explorer-chart').data"
        ".filter(t => t.mode === 'lines' && t.fill !== 'toself').map(t => t.name)"
    )
    assert sorted(names) == ["sharing = per_role (3 runs)", "sharing = shared (3 runs)"]
    _shot(page, "explorer-chart.png")


def test_search_columns_sort_brush_and_chart(served, chromium_path):
    base, runs = served
    with chromium(chromium_path) as browser:
        context = browser.new_context(
            viewport={"width": 1360, "height": 1000}, timezone_id="Asia/Tokyo"
        )
        page = context.new_page()
        page.goto(f"{base}/explore/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        expect(page.locator("h1")).to_have_text("Runs")
        _search_and_columns(page, base, runs)
        _sort(page, runs)
        _chart(page, base)
        _brush(page, base, runs)
