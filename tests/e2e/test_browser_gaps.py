"""A run the real MLflow client logs with a NaN and an inf reward, seen in a real browser (the
system's Chromium through Playwright) against gunicorn on the test database: the run page's
sparkline breaks there with a red × titled "NaN/inf at step N", its script draws the × of a
NaN logged while the page is open, and the panel's compare view carries a marker trace with
the same hover text. (The scripts are served from collected static files, which
`tests/live_server.py` collects.)"""

import math

import mlflow
import pytest

from tests.e2e.browser import chromium, screenshot, sign_in
from tests.live_server import mlflow_at_troupe
from webapp.dashboards import state
from webapp.experiments.models import Run

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
GAP_TEXTS_JS = """() => {
    const gd = document.querySelector('#curves-graph .js-plotly-plot');
    return gd && gd.data ? gd.data.filter(t => t.mode === 'markers' && t.text)
        .flatMap(t => t.text) : [];
}"""


def reward(step: int) -> float:
    return {4: math.nan, 6: math.inf}.get(step, 0.1 + 0.05 * step)


@pytest.fixture
def open_run(alice, tmp_path, monkeypatch):
    """A live server and an MLflow run still open (so the run page follows it), its first
    eight steps logged (before the browser starts: Django refuses ORM calls inside
    Playwright's loop)."""
    with mlflow_at_troupe(alice, tmp_path, monkeypatch, PASSWORD) as base:
        mlflow.set_experiment("diverging")
        with mlflow.start_run(run_name="nan reward") as active:
            for step in range(8):
                mlflow.log_metrics({"reward": reward(step), "loss": 1.0 / (step + 1)}, step=step)
            tags = mlflow.MlflowClient().get_run(active.info.run_id).data.tags
            yield base, Run.objects.get(id=int(tags["troupe.run_id"]))


def test_gaps_are_marked_on_the_run_page_and_in_the_compare_view(open_run, chromium_path):
    base, run = open_run
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        sign_in(page, f"{base}/runs/{run.id}/", "alice", PASSWORD)
        spark = page.locator('[data-spark="train/reward"]')
        titles = spark.locator(".spark-gap title")
        assert titles.all_text_contents() == ["NaN/inf at step 4", "NaN/inf at step 6"]
        assert spark.locator("polyline").count() == 3  # 0–3, 5, 7

        # A NaN logged while the page is open: its script redraws the sparkline from live.json.
        mlflow.log_metrics({"reward": math.nan}, step=8)
        page.wait_for_selector('[data-spark="train/reward"] .spark-gap[data-gap-step="8"]')
        assert spark.locator("[data-spark-last]").inner_text() == "NaN/inf"
        latest = page.locator("[data-latest] .metric", has_text="train/reward")
        assert latest.locator(".num").inner_text() == "NaN/inf"
        screenshot(page, "run-page-gaps.png")

        page.goto(f"{base}{state.compare_url([run.id], 'train/reward')}")
        page.wait_for_selector("#curves-graph .scatterlayer .trace")
        page.wait_for_function(f"({GAP_TEXTS_JS})().length > 0")
        assert page.evaluate(GAP_TEXTS_JS) == [
            "NaN/inf at step 4",
            "NaN/inf at step 6",
            "NaN/inf at step 8",
        ]
        screenshot(page, "compare-gaps.png")
