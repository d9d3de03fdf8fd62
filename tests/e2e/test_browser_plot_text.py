"""A run name holding HTML, drawn by the panel's curves figure in the real Chromium with
plotly.js: the legend and the hover box show it as text, and no link or styled span reaches
the page. A control figure given the raw name shows what the escaping prevents."""

import pytest

from tests.e2e.browser import chromium, screenshot
from webapp.dashboards import figures, labels
from webapp.experiments.models import Run

pytestmark = pytest.mark.e2e

NAME = '<a href="https://evil.example/">click me</a> <span style="font-size:60px">big</span>'
SERIES = {"steps": [0, 10, 20], "values": [0.1, 0.4, 0.3]}


def curves_of(run: Run):
    """The hostile run beside a plain one (plotly shows no legend for a single line)."""
    runs = [run, Run(id=8, name="plain", sharing="shared", seed=1)]
    series = {r.id: {"train/reward": SERIES} for r in runs}
    return figures.curves_figure(runs, series, {}, "train/reward")


def render(browser, figure, tmp_path, name: str):
    page = browser.new_page()
    path = tmp_path / f"{name}.html"
    figure.write_html(path, include_plotlyjs=True, full_html=True)  # plotly.js inline: no CDN
    page.goto(path.as_uri())
    page.wait_for_selector(".legendtext", state="attached")
    return page


def test_a_run_name_with_html_is_drawn_as_text(chromium_path, tmp_path, monkeypatch):
    run = Run(id=7, name=NAME, sharing="shared", seed=0)
    with chromium(chromium_path) as browser:
        page = render(browser, curves_of(run), tmp_path, "escaped")
        legend = page.eval_on_selector_all(".legendtext", "els => els.map(e => e.textContent)")
        links = page.locator(".js-plotly-plot svg a").count()
        big = page.locator(".js-plotly-plot svg [style*='font-size:60px']").count()
        screenshot(page, "plot-text-escaped.png")

        # The control: the same figure with the name passed to plotly unescaped.
        monkeypatch.setattr(labels, "plot_text", lambda text: text)
        raw = render(browser, curves_of(run), tmp_path, "raw")
        raw_links = raw.locator(".js-plotly-plot svg a").count()

    assert f"run 7 · {NAME}" in legend  # every character shown, as typed
    assert (links, big) == (0, 0)
    assert raw_links >= 1  # plotly does render a name's HTML when it is not escaped
