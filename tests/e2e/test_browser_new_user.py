"""The new user's walk-through in a real browser (the system's Chromium through Playwright),
against gunicorn and a real Celery worker on the test database: the new user's path.

1. A matrix of 4 (two workflows × two sharing modes, one seed) queued in the new-experiment
   form on the cpu-demo preset, tiny step counts; the experiment page counts one seed per
   cell, and the statistics page says "not enough data" (one seed is fewer than 3).
2. A tiny-m run (its weights are not shipped: its first run warm-starts it for minutes) is
   queued through the form. Meanwhile, from a finished run's last step (its peak when the
   accuracy rose to the end; the step checkpoint otherwise: both are offered) the branch
   form queues a child: queued behind the warm start, shown as a branch of its parent, not
   as a new seed in the matrix.
3. Once the tiny-m run's page says "Preparing model tiny-m: warm start …", Cancel ends it
   within seconds, and the queue moves on (the branch runs).
4. A run that falls to 0 from a small peak, written through the JSON API as an external run
   (deterministic), shows a cliff with its threshold and the test's evidence on its page.

Only what is deterministic is asserted (counts, states, lineage, verdict words), never
accuracies. Screenshots go to artifacts/ (new-user-*.png).
"""

import json
import math
import re
import time
import urllib.request

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.helpers import database_url, service_env, start_worker
from tests.live_server import live_troupe
from tests.runs import SMALL
from webapp.experiments.models import ApiToken, Experiment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),
]

PASSWORD = "correct horse battery"
# Fewer steps and problems than SMALL: the whole walk shares two cores with other work.
TINY = {**SMALL, "steps": 2, "eval_every": 2, "eval_problems": 8, "max_new_tokens": 16}
LAST = TINY["steps"]
# The collapse: up from 0.125 to a small peak of 0.25 at step 20, then down to 0 and staying
# there; each evaluation's SE as a Troupe run logs it (binomial, 64 problems).
COLLAPSE = [0.125, 0.1875, 0.25, 0.1875, 0.0625, 0.0, 0.0, 0.0]


@pytest.fixture
def frank(django_user_model):
    return django_user_model.objects.create_user("frank", password=PASSWORD)


@pytest.fixture
def token(frank) -> str:
    return ApiToken.issue(frank, "new user")[1]


@pytest.fixture
def external_experiment(frank) -> int:
    return Experiment.objects.create(owner=frank, name="Logged elsewhere", preset="cpu-demo").id


@pytest.fixture
def worker(tiny_model, transactional_db):
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        TROUPE_HEARTBEAT_SECONDS="1",  # the warm start's phase reaches the page quickly
        OMP_NUM_THREADS="1",
        OMP_WAIT_POLICY="PASSIVE",
    )
    with start_worker(env) as started:
        yield started


@pytest.fixture
def server(worker, tmp_path, monkeypatch):
    """DEBUG lets WhiteNoise serve the pages' scripts from the source tree."""
    monkeypatch.setenv("DEBUG", "1")
    with live_troupe(tmp_path) as base:
        yield base


def api(base: str, token: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{base}/api/v1/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def fill_form(page, name: str, model: str, workflows: list[str], sharing: list[str]) -> None:
    page.goto(page.url.split("/experiments/")[0] + "/experiments/new/?preset=cpu-demo")
    page.fill("#id_name", name)
    for box in page.locator('input[name="model"]').all():
        box.set_checked(box.get_attribute("value") == model)
    for box in page.locator('input[name="workflow"]').all():
        box.set_checked(box.get_attribute("value") in workflows)
    for box in page.locator('input[name="sharing"]').all():
        box.set_checked(box.get_attribute("value") in sharing)
    page.fill("#id_seeds", "0")
    for field, value in TINY.items():
        page.fill(f"#id_{field}", str(value))


def test_the_new_users_path(server, token, external_experiment, chromium_path, worker):
    base = server
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/experiments/new/?preset=cpu-demo")
        page.fill("#id_username", "frank")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#experiment-form")

        # 1. A matrix of 4: two workflows × two sharing modes, seed 0.
        fill_form(page, "New user's matrix", "tiny-s", ["single", "voting"], ["shared", "per_role"])
        expect(page.locator("[data-run-count]").first).to_have_text("4 runs")
        page.click("button[type=submit] >> text=Queue")
        page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
        matrix_url = page.url
        expect(page.locator(".message.success")).to_have_text("Queued 4 runs.")
        expect(page.locator(".run-cell .status-succeeded")).to_have_count(4, timeout=600_000)
        expect(page.locator(".matrix tbody tr")).to_have_count(4)
        expect(page.locator(".matrix th.seed")).to_have_count(1)  # one seed column: seed 0
        expect(page.locator(".matrix th.seed")).to_have_text("seed 0")
        expect(page.locator(".run-cell")).to_have_count(4)
        expect(page.locator('[data-count="succeeded"]')).to_have_text("4")
        screenshot(page, "new-user-1-matrix.png")

        page.click("text=Statistics")
        expect(page.locator("h1")).to_have_text("Statistics across seeds")
        expect(page.locator("#stats-runs")).to_contain_text("4 succeeded runs counted")
        expect(page.locator('[data-verdict="sharing"]')).to_contain_text(
            "Not enough data in 2 cells: fewer than 3 seeds give no interval and no verdict."
        )
        expect(page.locator("tr[data-cell]")).to_have_count(2)
        for cell in page.locator("tr[data-cell]").all():
            expect(cell.locator("td.num").first).to_have_text("1")  # one pair
        screenshot(page, "new-user-2-stats.png")

        # 2. The warm start's run, queued first so that it holds the worker ...
        fill_form(page, "Warm start", "tiny-m", ["single"], ["shared"])
        expect(page.locator("[data-run-count]").first).to_have_text("1 run")
        page.click("button[type=submit] >> text=Queue")
        page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
        expect(page.locator(".message.success")).to_have_text("Queued 1 run.")
        # tiny-m is built on first use, which the form said before queueing; queued, it says
        # so again.
        expect(page.locator(".message.warning")).to_contain_text("Not built on this server yet")
        warm_id = int(page.locator(".run-cell").first.get_attribute("data-run-id"))

        # ... and a branch from a finished run's last step, queued behind it.
        page.goto(matrix_url)
        runs = [int(cell.get_attribute("data-run-id")) for cell in page.locator(".run-cell").all()]
        best_steps = {
            run: int(
                api(base, token, f"runs/{run}/metrics?keys=ckpt/best_step")["series"][
                    "ckpt/best_step"
                ]["values"][-1]
            )
            for run in runs
        }
        peaked_last = [run for run in runs if best_steps[run] == LAST]
        parent = (peaked_last or runs)[0]
        page.goto(f"{base}/runs/{parent}/")
        last = page.locator("#branch-form label.chip", has_text=f"step {LAST}")
        expect(last).to_have_count(1)
        if peaked_last:
            expect(last).to_contain_text(f"step {LAST} · peak")
            expect(last.locator("input")).to_be_checked()  # the peak is the default
        last.locator("input").check()
        page.uncheck("#id_control")
        page.fill("#id_lr_factor", "0.5")
        page.locator("#branch-form").scroll_into_view_if_needed()
        screenshot(page, "new-user-3-branch-form.png")
        page.click("#queue-branches")
        expect(page.locator(".message")).to_have_text(
            re.compile(rf"Queued 1 branch from step {LAST}: run #\d+\.")
        )
        child = int(re.search(r"#(\d+)", page.locator(".message").inner_text()).group(1))
        expect(page.locator("[data-children] tbody tr")).to_have_count(1)
        assert api(base, token, f"runs/{child}")["status"] == "queued"
        assert api(base, token, f"runs/{child}")["lineage"]["parent"] == parent

        page.goto(matrix_url)
        expect(page.locator(".run-cell")).to_have_count(4)  # a branch is not a seed
        expect(page.locator(".matrix th.seed")).to_have_count(1)
        expect(page.locator(f'.run-cell[data-run-id="{child}"]')).to_have_count(0)
        expect(page.locator(".branch-count")).to_have_text("+1 branch")
        row = page.locator(f'tr[data-run-id="{child}"]')
        expect(row.locator(f'[data-branch-of="{parent}"]')).to_have_text(
            f"branch of #{parent} @{LAST}"
        )
        expect(row.locator(".status-queued")).to_have_count(1)
        screenshot(page, "new-user-4-branch-queued.png")

        # 3. Cancel during the warm start.
        page.goto(f"{base}/runs/{warm_id}/")
        phase = page.locator("#run-live [data-phase]")
        expect(phase).to_contain_text(
            re.compile(r"Preparing model tiny-m: warm start \d+% \(\d+s elapsed"), timeout=180_000
        )
        screenshot(page, "new-user-5-warm-start.png")
        # Within its first percent too, the line says how long is left (it once stayed
        # at "0% (21 s elapsed)").
        expect(phase).to_contain_text(
            re.compile(r"warm start \d+% \(.+, about .+ left\)"), timeout=60_000
        )
        screenshot(page, "new-user-5b-warm-start-estimate.png")
        pressed = time.monotonic()
        page.click("#cancel-run")
        expect(page.locator("#run-live [data-status]")).to_have_text("cancelled", timeout=15_000)
        assert time.monotonic() - pressed < 15
        screenshot(page, "new-user-6-cancelled.png")
        page.goto(f"{base}/runs/{child}/")  # the queue moves on: the branch trains next
        expect(page.locator("#run-live [data-status]")).to_have_text(
            re.compile("running|succeeded"), timeout=60_000
        )
        expect(page.locator("[data-lineage]")).to_contain_text(
            f"Branched from run #{parent} at step {LAST}"
        )

        # 4. A collapse from a small peak, logged through the API: a cliff, not "none".
        external = api(
            base,
            token,
            "runs",
            {
                "name": "collapse",
                "experiment": external_experiment,
                "config": {"steps": 70, "seed": 0},
            },
        )["id"]
        points = []
        for index, accuracy in enumerate(COLLAPSE):
            se = math.sqrt(accuracy * (1 - accuracy) / 64)
            points += [
                {"key": "eval/accuracy", "step": 10 * index, "value": accuracy},
                {"key": "eval/accuracy_se", "step": 10 * index, "value": se},
            ]
        api(base, token, f"runs/{external}/metrics", {"points": points})
        api(base, token, f"runs/{external}/finish", {"status": "succeeded"})
        page.goto(f"{base}/runs/{external}/")
        verdict = page.locator("[data-cliff-verdict]")
        expect(verdict).to_contain_text(re.compile(r"cliff @\d+"))
        expect(verdict).to_contain_text(re.compile(r"below 0\.\d{3}"))
        expect(verdict).not_to_contain_text("none")
        expect(page.locator("[data-cliff-evidence]")).to_contain_text("Cliff test: ")
        screenshot(page, "new-user-7-collapse.png")

        page.goto(f"{base}/runs/{child}/")
        expect(page.locator("#run-live [data-status]")).to_have_text("succeeded", timeout=120_000)
        screenshot(page, "new-user-8-branch-done.png")


# --- verdicts the numbers support -----------------------------------------------------------------

# Base .156, a bump to .180 at step 2 (within one SE of it), then a collapse to 0: the same
# verdict as the collapse without the bump, "degradation" (docs/analysis.md).
BUMPED = [0.156, 0.16, 0.180, 0.15, 0.0, 0.0, 0.0, 0.0]
# A peak of .03 with an SE of .02 an evaluation: no threshold above 0, so no verdict.
TOO_LOW = [0.0, 0.01, 0.03, 0.02, 0.01, 0.02, 0.0, 0.01]


@pytest.fixture
def matrix_experiment(frank) -> int:
    return Experiment.objects.create(owner=frank, name="Two cells", preset="cpu-demo").id


@pytest.fixture
def bare_server(transactional_db, tmp_path, monkeypatch):
    """The web server alone: these runs are logged through the API, nothing trains."""
    monkeypatch.setenv("DEBUG", "1")
    with live_troupe(tmp_path) as base:
        yield base


def external_run(base, token, experiment, name, config, points, finish=True) -> int:
    run = api(base, token, "runs", {"name": name, "experiment": experiment, "config": config})
    api(base, token, f"runs/{run['id']}/metrics", {"points": points})
    if finish:
        api(base, token, f"runs/{run['id']}/finish", {"status": "succeeded"})
    return run["id"]


def accuracy_points(values, se):
    return [
        {"key": key, "step": step, "value": value}
        for step, accuracy in enumerate(values)
        for key, value in (("eval/accuracy", accuracy), ("eval/accuracy_se", se))
    ]


def share_points(steps, generator):
    return [
        {"key": f"role/{role}/grad_share", "step": step, "value": share}
        for step in steps
        for role, share in (("generator", generator), ("aggregator", 1 - generator))
    ]


def test_the_new_users_verdicts_hold_to_the_numbers(
    bare_server, token, external_experiment, matrix_experiment, chromium_path
):
    base, experiment = bare_server, external_experiment
    bumped = external_run(
        base, token, experiment, "bump", {"steps": 7, "seed": 1}, accuracy_points(BUMPED, 0.027)
    )
    too_low = external_run(
        base, token, experiment, "too low", {"steps": 7, "seed": 2}, accuracy_points(TOO_LOW, 0.02)
    )
    shared = {"steps": 12, "seed": 3, "workflow": "voting", "sharing": "shared"}
    early = external_run(
        base, token, experiment, "capture", shared, share_points(range(6), 0.9), finish=False
    )
    # Two cells, three seeds each, per_role − shared at +.10 and −.10 (a little spread).
    for workflow, effect in (("voting", 0.10), ("single", -0.10)):
        for seed, noise in enumerate((0.0, 0.004, -0.004)):
            for sharing, peak in (("shared", 0.3), ("per_role", 0.3 + effect + noise)):
                config = {
                    "steps": 4,
                    "seed": seed,
                    "workflow": workflow,
                    "sharing": sharing,
                    "task": "math",
                    "model": "tiny-s",
                }
                points = accuracy_points([0.1, peak, peak, peak, peak], 0.01)
                name = f"{workflow}-{sharing}-{seed}"
                external_run(base, token, matrix_experiment, name, config, points)

    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/runs/{bumped}/")
        page.fill("#id_username", "frank")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")

        # A bump noise explains does not make a cliff.
        page.goto(f"{base}/runs/{bumped}/")
        verdict = page.locator("[data-cliff-verdict]")
        expect(verdict).to_contain_text("degradation @4")
        expect(page.locator("[data-cliff-evidence]")).to_contain_text("within 1 SE")
        expect(page.locator("[data-steps]").first).to_contain_text("step 7 of 7")
        expect(page.locator("[data-best]")).to_contain_text("logged from elsewhere")
        screenshot(page, "new-user-9-bump-is-degradation.png")

        # A threshold accuracy cannot reach: no verdict, and no "below −0.0…".
        page.goto(f"{base}/runs/{too_low}/")
        expect(verdict).to_have_text("cannot judge: accuracy too low")
        screenshot(page, "new-user-10-too-low.png")

        # Capture: "not enough steps yet" until 10 logged steps, then the role.
        page.goto(f"{base}/runs/{early}/")
        expect(page.locator("[data-capture-verdict]")).to_have_text("not enough steps yet")
        screenshot(page, "new-user-11-capture-too-early.png")
        api(base, token, f"runs/{early}/metrics", {"points": share_points(range(6, 12), 0.9)})
        page.reload()
        expect(page.locator("[data-capture-verdict]")).to_have_text("by generator")

        # The experiment page says what the run pages say.
        page.goto(f"{base}/experiments/{experiment}/")
        expect(page.locator(f'tr[data-run-id="{bumped}"] [data-cliff-verdict]')).to_contain_text(
            "degradation @4"
        )
        expect(page.locator(f'tr[data-run-id="{too_low}"] [data-cliff-verdict]')).to_contain_text(
            "cannot judge"
        )
        # The matrix's last column fits (it was cut off at 1400 px).
        link = page.locator(".matrix td.cell-links a", has_text="gradients").first.bounding_box()
        frame = page.locator(".table-scroll").first.bounding_box()
        assert link["x"] + link["width"] <= frame["x"] + frame["width"]
        # A running run's key results follow its points without a reload.
        final = page.locator(f'tr[data-run-id="{early}"] [data-result="final"]')
        expect(final).to_have_text("—")
        api(
            base, token, f"runs/{early}/metrics", {"points": accuracy_points([0.5, 0.4, 0.3], 0.01)}
        )
        expect(final).to_have_text("0.400")
        screenshot(page, "new-user-12-experiment.png")

        # Cells at +.10 and −.10 are not pooled into "no difference".
        page.goto(f"{base}/experiments/{matrix_experiment}/stats/")
        expect(page.locator('[data-verdict="sharing"]')).to_contain_text(
            "cells disagree: see each cell"
        )
        expect(page.locator('[data-verdict="sharing"]')).to_contain_text(
            "cliff rate: no cliffs in any run"
        )
        expect(page.locator("tfoot")).to_contain_text("cells disagree: see each cell")
        expect(page.locator("tfoot")).not_to_contain_text("[+0.000, +0.000]")
        screenshot(page, "new-user-13-cells-disagree.png")
