"""The panel and the pages say one thing, in a real browser (the system's Chromium through
Playwright) against gunicorn on the test database:

- a cell of one succeeded and two cancelled runs counts one seed on the matrix, its compare
  link, the attribution view and the seed bands, each saying what it left out;
- the compare table names verdicts as the run page does ("too few evaluations");
- a shared run with no cosine logged gets an empty cosine panel that says so, not a claim in
  its norm panel, and no step axis below 0;
- the attribution view gives a share's interval and says when it crosses 0; the run page draws
  no interaction bar and names a mix source "latest (step 12)";
- a retracted alert stays on the Alerts page with why, behind styled filters;
- the demo is tagged synthetic and its run page's radar names its cliff;
- 24 groups of seed bands keep their legend off the x-axis title;
- no page fails to load a script or asks for a missing /favicon.ico.

Screenshots go to artifacts/ (and to $TROUPE_SHOTS when set, for a person to look at).
"""

import os
import shutil
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.e2e.browser import ARTIFACTS, chromium, screenshot, sign_in
from tests.live_server import live_troupe
from tests.stats_runs import flat, stored_run
from vocabulary.names import ACCURACY_KEY, role_key
from webapp.attribution.models import SwapJob
from webapp.demo.build import build_demo_experiment
from webapp.experiments.models import Alert, Experiment, Run
from webapp.metrics import write_points

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

PASSWORD = "correct horse battery"
SHOTS = Path(os.environ["TROUPE_SHOTS"]) if os.environ.get("TROUPE_SHOTS") else None
CHECKPOINT = "/srv/troupe/runs/{run}/checkpoints/step-000012"


def _gradients(run: Run) -> None:
    """A shared voting run's norms and shares, and no cosine: no step had both roles'
    gradients nonzero."""
    points = []
    for step in range(12):
        points += [
            (role_key("generator", "grad_norm"), step, 0.1),
            (role_key("aggregator", "grad_norm"), step, 0.2),
            (role_key("generator", "grad_share"), step, 0.3),
            (role_key("aggregator", "grad_share"), step, 0.7),
        ]
    write_points(run.id, points)


def _attribution(run: Run) -> None:
    def value(v, low, high):
        return {"value": v, "low": low, "high": high}

    result = {
        "method": "shapley",
        "roles": ["generator", "aggregator"],
        "problems": 32,
        "change": value(0.2, 0.1, 0.3),
        "shares": {
            "generator": value(0.014, -0.04, 0.068),
            "aggregator": value(0.186, 0.122, 0.25),
        },
        "interaction": value(0.03, -0.01, 0.07),
    }
    SwapJob.objects.create(run=run, kind="gain", status="succeeded", result=result)
    mix = {
        "roles": ["generator", "aggregator"],
        "evaluations": [
            {
                "key": "generator=base aggregator=latest",
                "sources": {"generator": "base", "aggregator": CHECKPOINT.format(run=run.id)},
                "reuse_step": None,
            }
        ],
    }
    SwapJob.objects.create(run=run, kind="mix", status="queued", plan=mix)


def _alerts(run: Run) -> None:
    Alert.objects.create(
        run=run, kind="cliff", key=ACCURACY_KEY, step=50, seen_at=70, provisional=True,
        retracted=timezone.now(),
        retraction="no longer seen at step 80: the series recovered",
    )  # fmt: skip


@pytest.fixture
def served(alice, tmp_path):
    """Everything the pages show, stored before the browser starts (Django refuses ORM calls
    inside Playwright's loop)."""
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    study = Experiment.objects.create(owner=alice, name="Honest study", preset="cpu-demo")
    kept = stored_run(study, seed=0, sharing="shared", accuracy=flat(0.6))
    for seed in (1, 2):
        stored_run(study, seed=seed, sharing="shared", accuracy=None, status=Run.CANCELLED)
    few = stored_run(
        study,
        seed=0,
        sharing="per_role",
        accuracy=None,
        status=Run.RUNNING,
        extra=[(ACCURACY_KEY, 0, 0.2), (ACCURACY_KEY, 10, 0.3)],
    )
    _gradients(kept)
    _attribution(kept)
    _alerts(kept)
    many = Experiment.objects.create(owner=alice, name="Many groups", preset="cpu-demo")
    for seed in range(24):
        stored_run(many, seed=seed, sharing="shared", accuracy=flat(0.3 + seed / 100))
    demo = build_demo_experiment(alice, runs=2, steps=120, name="Synthetic walk")
    ids = {"study": study.id, "kept": kept.id, "few": few.id, "many": many.id}
    ids |= {"demo": demo.experiment.id, "demo_cliff": demo.cliff_run.id}
    ids["demo_onset"] = demo.cliff_onset
    with live_troupe(tmp_path) as base:
        yield base, ids


def _shot(page, name: str) -> None:
    path = screenshot(page, name)
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SHOTS / name)


def _drawn(page, selector: str) -> None:
    """Wait for a callback's output: a view's first callback reads every summary, which on a
    loaded machine takes longer than an assertion's usual wait."""
    page.wait_for_selector(selector, timeout=120_000)


def _panel_checks(page, base: str, ids: dict) -> None:
    study = ids["study"]
    page.goto(f"{base}/dash/")
    expect(page.locator(f'a[href="/dash/attribution?experiment={study}"]')).to_have_count(1)

    page.goto(f"{base}/dash/matrix?experiment={study}")
    _drawn(page, "#matrix-table tbody tr")
    cells = page.locator("#matrix-table tbody tr")
    expect(cells).to_have_count(2)  # shared (1 seed, 2 cancelled) and per_role (1 running)
    expect(cells.filter(has_text="compare 1 →")).to_have_count(2)
    expect(page.locator("#matrix-status")).to_contain_text("2 runs left out (2 cancelled)")
    expect(page.locator("#matrix-attribution")).to_have_attribute(
        "href", f"/dash/attribution?experiment={study}"
    )
    expect(page.locator("#matrix-behaviour-note")).to_be_hidden()
    _shot(page, "honest-matrix.png")

    page.goto(f"{base}/dash/compare?runs={ids['kept']},{ids['few']}")
    _drawn(page, "#curves-table tbody tr")
    few = page.locator("#curves-table tbody tr", has_text="running")  # the run with 2 evaluations
    expect(few).to_contain_text("too few evaluations")
    expect(page.locator("#curves-table")).not_to_contain_text("insufficient")
    _shot(page, "honest-compare.png")

    page.goto(f"{base}/dash/bands?experiment={study}")
    _drawn(page, "#bands-table tbody tr")
    expect(page.locator("#bands-status")).to_contain_text("2 runs left out (2 cancelled)")
    expect(page.locator("#bands-table tbody tr")).to_have_count(2)  # the seed and the running
    expect(page.locator("#bands-table")).not_to_contain_text("cancelled")

    page.goto(f"{base}/dash/attribution?experiment={study}")
    _drawn(page, "#attribution-table tbody tr")
    table = page.locator("#attribution-table")
    expect(table).to_contain_text("7% [−20%, 34%] crosses 0")
    expect(table).to_contain_text("1 of 1")
    _shot(page, "honest-attribution.png")


GRADIENT_JS = """() => {
    const gd = document.querySelector('#gradients-graph .js-plotly-plot');
    if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis3) return null;
    const notes = (gd.layout.annotations || []).map(a => [a.text, a.xref]);
    return {notes: notes, low: gd._fullLayout.xaxis.range[0]};
}"""
LEGEND_JS = """() => {
    const title = document.querySelector('#bands-graph .g-xtitle');
    const legend = document.querySelector('#bands-graph .legend');
    if (!title || !legend) return null;
    const a = title.getBoundingClientRect(), b = legend.getBoundingClientRect();
    return a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
}"""


def _figure_checks(page, base: str, ids: dict) -> None:
    page.goto(f"{base}/dash/gradients?runs={ids['kept']}")
    page.wait_for_function(GRADIENT_JS, timeout=120_000)
    found = page.evaluate(GRADIENT_JS)
    notes = {text: ref for text, ref in found["notes"] if text.startswith("no ")}
    assert list(notes.values()) == ["x3 domain"], notes
    assert "no cosine logged" in next(iter(notes))
    assert found["low"] >= 0
    _shot(page, "honest-gradients.png")

    page.goto(f"{base}/dash/bands?experiment={ids['many']}&by=seed")
    page.wait_for_function(f"() => ({LEGEND_JS})() !== null", timeout=120_000)
    assert page.evaluate(LEGEND_JS) is True  # the legend clears the x-axis title
    _shot(page, "honest-bands-24.png")


def _page_checks(page, base: str, ids: dict) -> None:
    page.goto(f"{base}/runs/{ids['kept']}/")
    result = page.locator("#attribution-result")
    expect(result.locator('[data-role="generator"]')).to_have_count(1)
    expect(result.locator('[data-role="interaction"]')).to_have_count(0)
    expect(result.locator("[data-interaction]")).to_contain_text("add up to the change")
    expect(page.locator("#attribution tr[data-combination]")).to_contain_text("latest (step 12)")
    expect(page.locator("#attribution")).not_to_contain_text("/srv/troupe")
    page.locator("#attribution").screenshot(path=ARTIFACTS / "honest-run-attribution.png")
    _shot(page, "honest-run.png")

    page.goto(f"{base}/alerts/")
    row = page.locator("tr[data-retracted]")
    expect(row).to_contain_text("retracted")
    expect(row).to_contain_text("the series recovered")
    min_width = page.evaluate(
        "() => getComputedStyle(document.querySelector('#alert-filters select')).minWidth"
    )
    assert min_width not in ("auto", "0px")  # the filters are styled (12rem), not the default
    _shot(page, "honest-alerts.png")

    page.goto(f"{base}/experiments/")
    expect(page.locator("tr", has_text="Synthetic walk").locator(".tag")).to_have_text("synthetic")
    page.goto(f"{base}/runs/{ids['demo_cliff']}/")
    expect(page.locator('#radar tr[data-alert-kind="cliff"]')).to_contain_text(
        str(ids["demo_onset"])
    )
    _shot(page, "honest-demo-run.png")


def test_the_panel_and_pages_say_one_thing(served, chromium_path):
    base, ids = served
    missing, errors = [], []
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: r.status == 404 and missing.append(r.url))
        sign_in(page, f"{base}/dash/", "alice", PASSWORD)
        try:
            _panel_checks(page, base, ids)
            _figure_checks(page, base, ids)
            _page_checks(page, base, ids)
        except AssertionError:
            screenshot(page, "honest-failed.png")  # where it stopped, for a person
            raise
    assert missing == []  # no /favicon.ico (nor a script) missing on any page
    assert errors == []  # no "DashRenderer is not defined"
