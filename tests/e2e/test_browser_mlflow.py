"""A run logged by the real MLflow client with the study's fork's keys (`actor/<role>/grad_norm`,
verl's `val-core/…/acc/mean_at_1`) shows in the gradient page of a real browser (the system's
Chromium through Playwright), against gunicorn on the test database: each role's curve, and
the amplification ahead of the cliff in the dynamics table; and the "View run" link the client
prints (an address of MLflow's own UI) opens the run's page, after signing in or at once."""

import mlflow
import pytest

from analysis.runs import summarize_run
from tests.e2e.browser import chromium, screenshot, sign_in
from tests.live_server import mlflow_at_troupe
from webapp.experiments.models import Run

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
STEPS = 100
TRACE_NAMES_JS = """() => {
    const gd = document.querySelector('#gradients-graph .js-plotly-plot');
    return gd && gd.data ? gd.data.map(t => t.name) : [];
}"""


def accuracy(step: int) -> float:
    if step >= 70:
        return 0.1  # the terminal cliff
    return 0.2 + 0.01 * min(step, 40)


def grad_norms(step: int) -> dict[str, float]:
    generator = 1.0 + 0.01 * (step % 3) if step < 50 else 6.0 + 0.1 * (step % 4)
    return {"generator": generator, "aggregator": 0.5 + 0.01 * (step % 2)}


@pytest.fixture
def logged(alice, tmp_path, monkeypatch):
    """A live server, and a run logged into it through MLflow (before the browser starts:
    Django refuses ORM calls inside Playwright's loop)."""
    with mlflow_at_troupe(alice, tmp_path, monkeypatch, PASSWORD) as base:
        mlflow.set_experiment("verl voting")
        with mlflow.start_run(run_name="voting per-role seed 0") as active:
            mlflow.set_tags({"workflow": "voting", "task": "math", "sharing": "per_role"})
            for step in range(STEPS):
                metrics = {f"actor/{r}/grad_norm": v for r, v in grad_norms(step).items()}
                if step % 5 == 0:
                    metrics["val-core/math/acc/mean_at_1"] = accuracy(step)
                mlflow.log_metrics(metrics, step=step)
        tags = mlflow.MlflowClient().get_run(active.info.run_id).data.tags
        yield base, Run.objects.get(id=int(tags["troupe.run_id"]))


def expected_lead() -> int:
    evals = range(0, STEPS, 5)
    series = {"eval/accuracy": (list(evals), [accuracy(s) for s in evals])}
    for role in ("generator", "aggregator"):
        series[f"role/{role}/grad_norm"] = (
            list(range(STEPS)),
            [grad_norms(s)[role] for s in range(STEPS)],
        )
    return summarize_run(series)["lead"]["generator"]


def test_an_mlflow_logged_run_shows_its_roles_in_the_gradient_page(logged, chromium_path):
    base, run = logged
    lead = expected_lead()
    assert lead and lead > 0  # the logged data has amplification ahead of the cliff
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        sign_in(page, f"{base}/dash/gradients?runs={run.id}", "alice", PASSWORD)
        page.wait_for_selector("#gradients-graph .scatterlayer .trace")
        page.wait_for_selector("#gradients-table table.data")

        names = page.evaluate(TRACE_NAMES_JS)
        assert {"generator", "aggregator"} <= set(names)
        row = page.locator("#gradients-table tbody tr", has_text="generator")
        assert f"yes, by {lead} steps" in row.inner_text()
        screenshot(page, "mlflow-gradients.png")


def test_the_clients_view_run_link_opens_the_run_page(logged, chromium_path):
    base, run = logged
    uuid, experiment = run.tracked.uuid, run.experiment_id  # no ORM inside Playwright's loop
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        # What the client printed: sign in on the way, then land on the run itself.
        sign_in(page, f"{base}/#/experiments/{experiment}/runs/{uuid}", "alice", PASSWORD)
        page.wait_for_url(f"{base}/runs/{run.id}/")
        # Signed in already, "View experiment" goes straight to it.
        page.goto(f"{base}/#/experiments/{experiment}")
        page.wait_for_url(f"{base}/experiments/{experiment}/")
