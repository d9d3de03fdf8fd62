"""The panel in a real browser (the system's Chromium, driven by Playwright) against the real
WSGI application — Django and the mounted Dash app — served by gunicorn on the test database:
sign in, open the matrix of the demo experiment, click a cell, see its curves with a cliff
marker, open its gradient dynamics, export a figure and a table, see the capture of a shared
policy. Screenshots go to artifacts/.
"""

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from tests.e2e.browser import chromium, screenshot
from tests.live_server import live_troupe
from webapp.demo.build import LEAD, build_demo_experiment
from webapp.experiments.models import MetricPoint, Run

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
STEPS = 120
RUN_TABLE, POINT_TABLE = Run._meta.db_table, MetricPoint._meta.db_table
CLIFF_MARKER_JS = """(step) => {
    const gd = document.querySelector('#curves-graph .js-plotly-plot');
    return gd && gd.data && gd.data.some(
        t => t.marker && t.marker.symbol === 'x-thin' && t.x[0] === step);
}"""
LAST_STEP_JS = """(step) => {
    const gd = document.querySelector('#curves-graph .js-plotly-plot');
    if (!gd || !gd.data) return false;  // between two renders of the refreshed figure
    return gd.data.some(t => t.mode === 'lines+markers' && t.x[t.x.length - 1] === step);
}"""
CELL_JS = """([xaxis, yaxis, x, y]) => {
    const gd = document.querySelector('#matrix-graph .js-plotly-plot');
    const xa = gd._fullLayout[xaxis], ya = gd._fullLayout[yaxis];
    const box = gd.getBoundingClientRect();
    return [box.left + xa._offset + xa.d2p(x), box.top + ya._offset + ya.d2p(y)];
}"""


@pytest.fixture
def demo(alice):
    """The demo experiment (72 finished runs), owned by alice; committed, so the server sees
    it. Built before the browser starts: Django refuses ORM calls inside Playwright's loop."""
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    return build_demo_experiment(alice, steps=STEPS)


@pytest.fixture
def server(demo, tmp_path):
    """`gunicorn webapp.wsgi` on a free port, on the test database; its base URL."""
    with live_troupe(tmp_path) as base:
        yield base


@pytest.fixture
def browser_page(chromium_path, server, tmp_path):
    with chromium(chromium_path) as browser:
        context = browser.new_context(
            viewport={"width": 1440, "height": 900}, accept_downloads=True
        )
        yield context.new_page()


def sql(statement: str, *params) -> None:
    """Write to the test database behind the server's back, as a worker would. Django refuses
    database calls in a thread running an event loop (Playwright's), so the write runs in a
    thread of its own, on a connection of its own (autocommit), whatever the backend."""

    def write() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
        finally:
            connection.close()  # this thread's connection; the thread ends here

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(write).result()


def wait_until(page, js: str, arg=None, timeout: float = 30) -> None:
    """Poll `js` until it returns true. (Playwright's wait_for_function never saw the change
    in this suite, though the same expression evaluated true; plain polling does.)"""
    deadline = time.monotonic() + timeout
    while not page.evaluate(js, arg):
        assert time.monotonic() < deadline, f"timed out waiting for {js}"
        page.wait_for_timeout(100)


def test_from_the_matrix_to_a_cliff_and_its_gradient_dynamics(server, demo, browser_page):
    page = browser_page
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: r.status >= 500 and errors.append(f"{r.status} {r.url}"))
    experiment = demo.experiment.id

    # An anonymous visitor is sent to the login page, and back to the matrix after it.
    page.goto(f"{server}/dash/matrix?experiment={experiment}")
    assert page.url == f"{server}/accounts/login/?next=/dash/matrix%3Fexperiment%3D{experiment}"
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{server}/dash/matrix?experiment={experiment}")

    page.wait_for_selector("#matrix-graph .hm")  # the heatmaps are drawn
    page.wait_for_selector("#matrix-table table.data")
    assert page.locator("#matrix-table tbody tr").count() == 24
    assert page.locator("#matrix-status").inner_text().startswith("72 runs")
    screenshot(page, "dash-matrix.png")

    # Click the isolated-policy cell of voting · math · tiny-s: the known cliff run's cell.
    x, y = page.evaluate(CELL_JS, ["xaxis2", "yaxis2", "tiny-s", "Voting · math"])
    page.mouse.click(x, y)
    page.wait_for_url(re.compile(r"/dash/compare\?runs="))
    assert str(demo.cliff_run.id) in page.url.split("runs=")[1].split("&")[0].split(",")
    wait_until(page, CLIFF_MARKER_JS, demo.cliff_onset)
    cliff_row = page.locator("#curves-table tbody tr", has_text=f"{demo.cliff_onset}").first
    assert "cliff" in cliff_row.inner_text()
    screenshot(page, "dash-compare.png")

    # The compare view links to the gradient dynamics of the same runs.
    page.click("text=Gradient dynamics of these runs")
    page.wait_for_url(re.compile(r"/dash/gradients\?runs="))
    page.wait_for_selector("#gradients-table table.data")
    page.wait_for_selector("#gradients-graph .scatterlayer .trace")
    answer = page.locator("#gradients-table tbody tr", has_text=f"yes, by {LEAD} steps")
    assert answer.count() == 1 and demo.amplified_role in answer.inner_text()
    screenshot(page, "dash-gradients.png")

    # Exports: the figure as SVG from the mode bar, the table as CSV; both offline.
    page.click("#gradients-format label:has-text('SVG')")
    wait_until(
        page,
        "() => document.querySelector('#gradients-graph .js-plotly-plot')"
        "._context.toImageButtonOptions.format === 'svg'",
    )
    page.hover("#gradients-graph .js-plotly-plot")
    with page.expect_download() as image:
        page.click("#gradients-graph .modebar-btn[data-title^='Download plot']")
    assert image.value.suggested_filename == "troupe-gradients.svg"
    assert Path(image.value.path()).read_text()[:200].lstrip().startswith("<svg")
    with page.expect_download() as table:
        page.click("text=Table CSV")
    assert Path(table.value.path()).read_text().startswith("run,workflow,task,model,sharing")

    # A shared run: which role captured its policy.
    page.goto(f"{server}/dash/gradients?runs={demo.capture_run.id}")
    page.wait_for_selector("#gradients-table table.data")
    row = page.locator("#gradients-table tbody tr", has_text=demo.capturing_role)
    assert row.locator("td").last.inner_text() == "yes"
    assert (
        "captured the shared policy in 1 of 1" in page.locator("#gradients-findings").inner_text()
    )

    # Live: while a run is unfinished the open view refreshes itself, with no reload.
    sql(f"UPDATE {RUN_TABLE} SET status = 'running' WHERE id = %s", demo.capture_run.id)
    page.goto(f"{server}/dash/compare?runs={demo.capture_run.id}")
    page.wait_for_selector("#curves-status .live")
    page.evaluate("() => { window.notReloaded = true; }")
    sql(
        f"INSERT INTO {POINT_TABLE} (run_id, key, step, value) "
        "VALUES (%s, 'eval/accuracy', %s, 0.9)",
        demo.capture_run.id,
        STEPS + 10,
    )
    wait_until(page, LAST_STEP_JS, STEPS + 10, timeout=20)
    assert page.evaluate("() => window.notReloaded === true")

    assert not errors
    outside = [
        url for url in requests if not url.startswith(server) and not url.startswith("blob:")
    ]
    assert not outside, outside  # nothing from a CDN, or from anywhere else
