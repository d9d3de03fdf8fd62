"""The researcher's walk-through (queue, watch, branch, compare) in a real browser (the
system's Chromium through Playwright),
against gunicorn and real Celery workers (runs, radar) on the test database:

1. a real run on the tiny-s model falls off a cliff (a learning rate warmed up to 5e-2,
   evaluated every step) and the run page's Radar panel shows the cliff while the run trains,
   without a reload; the alerts page lists it, confirmed once the run ends;
2. from the run's peak (its best checkpoint, chosen by default) the branch form queues a
   learning-rate cut and a control continuation; the lineage is stored (the API says so) and
   each child's config is the parent's plus its change and `init_from`;
3. the compare view's lineage mode draws the parent and both branches, the branches named by
   their change, with a line at the branch step; a branch's page says where it came from.

Only what is deterministic is asserted (elements, lineage, configs), never accuracies.
Screenshots go to artifacts/ (walkthrough-*.png).
"""

import json
import re
import urllib.request

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.helpers import database_url, service_env, start_radar_worker, start_worker
from tests.live_server import live_troupe
from webapp.experiments.models import ApiToken
from webapp.runs.queueing import create_experiment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
]

PASSWORD = "correct horse battery"
# A cliff that does not hang on the warm start's exact weights (which differ from one build of
# tiny-s to the next): the learning rate warms up to 5e-2 over 10 steps, which drives any
# tiny-s to accuracy 0 within a few steps (all of 4 seeds by step 9, from a base of
# 0.16-0.18 on these 64 held-out problems; docs/benchmarks-log.md). The fall is far beyond
# the evaluation noise (docs/analysis.md); when no step beat the base it is reported as
# "degradation" rather than "cliff", so the radar row may be either. The
# docs/cli.md's `lr 1e-2` setting rises higher first, but whether it then falls depends on the
# weights: on one build it did, on the next it did not within 12 steps.
CLIFF = {
    "lr": 5e-2,
    "warmup_steps": 10,
    "schedule": "constant",
    "steps": 14,
    "eval_every": 1,
    "eval_problems": 64,
    "checkpoint_every": 4,
    "seed": 0,
}
BRANCH_LINE_JS = """(step) => {
    const gd = document.querySelector('#curves-graph .js-plotly-plot');
    return !!(gd && gd.layout && (gd.layout.shapes || []).some(
        s => s.x0 === step && s.line && s.line.dash === 'dash'));
}"""


@pytest.fixture
def erin(django_user_model):
    return django_user_model.objects.create_user("erin", password=PASSWORD)


@pytest.fixture
def token(erin) -> str:
    return ApiToken.issue(erin, "walkthrough")[1]


@pytest.fixture
def worker(tiny_model, transactional_db):
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        OMP_NUM_THREADS="1",
        OMP_WAIT_POLICY="PASSIVE",
    )
    # Two run workers, as a deployment with two cores would have: the parent trains on one,
    # and its two branches (control, then the cut) train side by side instead of the cut
    # waiting for the whole control run. The radar has its own: the cliff shows while the run
    # trains on the other.
    with start_worker(env) as started, start_worker(env) as second, start_radar_worker(env):
        yield started
        # The cut still trains when the test ends: a warm shutdown would wait 20 s for it
        # before killing it anyway.
        started.kill()
        second.kill()


@pytest.fixture
def server(worker, tmp_path, monkeypatch):
    """DEBUG lets WhiteNoise serve the pages' scripts from the source tree."""
    monkeypatch.setenv("DEBUG", "1")
    with live_troupe(tmp_path) as base:
        yield base


@pytest.fixture
def parent(erin, server) -> int:
    """The cliff run, queued once the worker and the server are up (and before the browser:
    Django refuses ORM calls inside Playwright's loop)."""
    experiment = create_experiment(erin, "Cliff walk-through", preset="cpu-demo", config=CLIFF)
    return experiment.runs.get().id


def api(base: str, token: str, path: str) -> dict:
    request = urllib.request.Request(
        f"{base}/api/v1/{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_a_cliff_seen_live_is_branched_from_its_peak_and_compared(
    server, parent, token, chromium_path, worker
):
    base = server
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/runs/{parent}/")  # the login page first, then the run's page
        page.fill("#id_username", "erin")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{base}/runs/{parent}/")
        assert page.locator("#run-live").get_attribute("data-status") in ("queued", "running")
        page.evaluate("window.loadedOnce = true")  # gone if the page reloads

        # 1. The cliff shows up in the Radar panel while the run trains: no reload in between.
        fall = '#radar tr[data-alert-kind="cliff"], #radar tr[data-alert-kind="degradation"]'
        cliff = page.locator(fall).first
        expect(cliff).to_be_visible(timeout=300_000)
        assert page.evaluate("window.loadedOnce === true"), "the cliff came with a reload"
        screenshot(page, "walkthrough-1-cliff-live.png")

        # The page reloads once the run finishes; the form then lists its final checkpoints.
        expect(page.locator("#run-live [data-status]")).to_have_text("succeeded", timeout=300_000)
        expect(page.locator(fall).first).to_contain_text("confirmed")

        page.goto(f"{base}/alerts/?run={parent}")
        expect(
            page.locator('tr:has-text("cliff"), tr:has-text("degradation")').first
        ).to_be_visible()
        screenshot(page, "walkthrough-2-alerts.png")

        # 2. Branch from the peak: the best checkpoint is the chosen one by default.
        best = api(base, token, f"runs/{parent}/metrics?keys=ckpt/best_step")
        best_step = int(best["series"]["ckpt/best_step"]["values"][-1])
        page.goto(f"{base}/runs/{parent}/")
        peak = page.locator(f'#branch-form label[data-checkpoint="best-{best_step:06d}"]')
        expect(peak).to_contain_text(f"step {best_step} · peak")
        expect(peak.locator("input")).to_be_checked()
        expect(page.locator("#id_control")).to_be_checked()
        expect(page.locator("[data-sharing-help]")).to_contain_text("Sharing mode is not offered")
        page.fill("#id_lr_factor", "0.1")
        page.locator("#branch-form").scroll_into_view_if_needed()
        screenshot(page, "walkthrough-3-form.png")
        page.click("#queue-branches")
        expect(page.locator(".message")).to_have_text(
            re.compile(rf"Queued 2 branches from step {best_step}: runs #\d+, #\d+\.")
        )
        expect(page.locator("[data-children] tbody tr")).to_have_count(2)
        expect(page.locator("[data-children]")).to_contain_text("lr 0.05 → 0.005")
        expect(page.locator("[data-children]")).to_contain_text("control (no change)")

        lineage = api(base, token, f"runs/{parent}")["lineage"]
        control_id, cut_id = (child["id"] for child in lineage["children"])
        assert [c["intervention"] for c in lineage["children"]] == [{}, {"lr": 0.005}]
        assert {c["branch_step"] for c in lineage["children"]} == {best_step}
        parent_config = api(base, token, f"runs/{parent}")["config"]
        for child_id, change in ((control_id, {}), (cut_id, {"lr": 0.005})):
            child = api(base, token, f"runs/{child_id}")
            assert child["experiment"] == api(base, token, f"runs/{parent}")["experiment"]
            assert child["lineage"]["parent"] == parent
            config = child["config"]
            assert config["init_from"].endswith(f"/checkpoints/best-{best_step:06d}")
            assert {k: v for k, v in config.items() if k != "init_from"} == {
                **{k: v for k, v in parent_config.items() if k != "init_from"},
                **change,
            }

        # 3. The comparison: the parent and both branches, each branch from its branch step.
        page.click("#compare-lineage")
        page.wait_for_url(re.compile(r".*/dash/compare\?.*"))
        wanted = [
            f"run {parent} · ",
            f"run {control_id} · control (no change) (from run {parent} @{best_step})",
            f"run {cut_id} · lr 0.05 → 0.005 (from run {parent} @{best_step})",
        ]
        page.wait_for_function(
            """(wanted) => {
                const gd = document.querySelector('#curves-graph .js-plotly-plot');
                const names = gd && gd.data ? gd.data.map(t => t.name || '') : [];
                return wanted.every(w => names.some(n => n.startsWith(w)));
            }""",
            arg=wanted,
            timeout=300_000,
        )
        assert page.evaluate(BRANCH_LINE_JS, best_step)
        page.wait_for_function(  # a few steps of the cut, for the screenshot to show it
            """(name) => document.querySelector('#curves-graph .js-plotly-plot').data
                .some(t => (t.name || '').startsWith(name) && t.x.length >= 4)""",
            arg=wanted[2],
            timeout=120_000,
        )
        expect(page.locator("#curves-graph")).to_contain_text(f"branch of run {parent}")
        screenshot(page, "walkthrough-4-compare.png")

        # A branch's page says where it came from.
        page.goto(f"{base}/runs/{cut_id}/")
        expect(page.locator("[data-lineage]")).to_contain_text(
            f"Branched from run #{parent} at step {best_step}: lr 0.05 → 0.005"
        )
        screenshot(page, "walkthrough-5-branch-page.png")
