"""The episode view in a real browser (the system's Chromium through Playwright) against
gunicorn on the test database: click a point on the run page's reward curve and land on that
step's episodes, open an episode and see its workflow and GRPO group, follow a probe problem
from the base through the peak to after the cliff, and click a point of the panel's accuracy
curve. A completion holding HTML shows as text, a long one is folded, and no page is wider
than the window. Screenshots go to artifacts/."""

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import chromium, screenshot
from tests.live_server import live_troupe
from tests.people import make_experiment
from tests.webapp.episode_records import eval_opt, orch_workers, voting
from webapp.episodes import store
from webapp.experiments.models import Run
from webapp.metrics import write_points

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

PASSWORD = "correct horse battery"
ACCURACY = [0.2, 0.4, 0.6, 0.7, 0.72, 0.7, 0.3, 0.2, 0.2, 0.2]  # peak at 40, cliff from 60
HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"><b>bold?</b>'
LONG = "Let me think step by step. " * 400  # ~10,000 characters: folded


def training_step(step: int) -> list[dict]:
    """2 problems × 4 samples of a voting step; sample 1 of p0 holds HTML, sample 2 a long
    completion."""
    records = []
    for p in range(2):
        for s in range(4):
            record = voting(
                "train",
                step,
                p * 4 + s,
                f"p{p}",
                s,
                correct=s % 2 == 0,
                voters=(1, 1, 0) if s % 2 == 0 else (1, 0, 0),
                text=f"\\boxed{{{step + s}}}",
            )
            if p == 0 and s == 1:
                record["turns"][0]["completion"] = HOSTILE
            if p == 0 and s == 2:
                record["turns"][1]["completion"] = LONG
            records.append(record)
    return records


def probe(step: int, accuracy: float) -> list[dict]:
    """Probe problems q0, q1 with 2 samples each, as many right as the accuracy says."""
    right = round(accuracy * 4)
    return [
        voting(
            "eval",
            step,
            i,
            f"q{i // 2}",
            i % 2,
            correct=i < right,
            text=f"\\boxed{{answer at {step}}}",
        )
        for i in range(4)
    ]


@pytest.fixture
def served(alice, run, tmp_path, monkeypatch):
    """A finished run with reward and accuracy curves (a cliff), and its episodes; the server.
    Rows are written before the browser starts: Django refuses ORM calls inside its loop."""
    monkeypatch.setenv("DEBUG", "1")  # WhiteNoise serves the scripts from the source tree
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    Run.objects.filter(id=run.id).update(status=Run.SUCCEEDED, step=90)
    steps = range(0, 100, 10)
    points = [("train/reward", s, 0.3 + 0.004 * s) for s in range(91)]
    points += [("eval/accuracy", s, a) for s, a in zip(steps, ACCURACY, strict=True)]
    points += [("eval/accuracy_se", s, 0.02) for s in steps]
    write_points(run.id, points)
    records = [r for s in steps for r in training_step(s)]
    records += [r for s, a in zip(steps, ACCURACY, strict=True) for r in probe(s, a)]
    store.write_episodes(run.id, records)
    with live_troupe(tmp_path) as base:
        yield base, run.id


def no_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_from_a_curve_point_to_an_episode_and_a_probe_problem_in_time(served, chromium_path):
    base, run_id = served
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: r.status >= 500 and errors.append(f"{r.status} {r.url}"))
        page.goto(f"{base}/runs/{run_id}/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")

        expect(page.locator("#episodes")).to_contain_text("80 training and 40 evaluation")
        screenshot(page, "episodes-run-panel.png")

        # A click at 1/3 of the reward sparkline: step 30 of 0..90, a recorded step.
        spark = page.locator('[data-spark="train/reward"] svg')
        box = spark.bounding_box()
        spark.click(position={"x": 3 + (box["width"] - 6) / 3, "y": box["height"] / 2})
        page.wait_for_url(f"**/runs/{run_id}/episodes/?kind=train&step=30&near=1")
        expect(page.locator("h1")).to_contain_text("step 30")
        expect(page.locator("#groups [data-group]")).to_have_count(2)

        # Open sample 2 of p0 (a long completion): its workflow and its group.
        page.locator('#groups [data-group="p0"] [data-sample="2"]').click()
        episode = page.locator("#episode")
        expect(episode.locator("[data-workflow=voting]")).to_be_visible()
        expect(episode.locator(".ep-stage")).to_have_count(2)
        expect(episode.locator(".ep-stage").first).to_contain_text("voters")
        expect(episode.locator(".ep-stage").nth(1)).to_contain_text("aggregator")
        expect(episode.locator("[data-siblings] .ep-card")).to_have_count(4)
        expect(episode.locator("[data-siblings] .is-open")).to_have_attribute("data-sample", "2")
        expect(episode.locator(".ep-more summary")).to_contain_text("more characters")
        assert no_overflow(page)
        screenshot(page, "episodes-step.png")

        # Sample 1 holds HTML: shown as text, never run.
        page.locator('[data-siblings] [data-sample="1"]').click()
        expect(page.locator("#episode [data-completion]").first).to_have_text(HOSTILE)
        assert page.evaluate("document.body.dataset.owned") is None

        # A filter keeps the incorrect samples and dims their correct siblings.
        page.select_option("select[name=correct]", "incorrect")
        page.click("#episode-filters button[type=submit]")
        expect(page.locator("[data-kept]")).to_have_text("4 matches")
        expect(page.locator("#groups .is-dimmed")).to_have_count(4)

        # The probe problem at base, peak and after the cliff, side by side.
        page.click("[data-time-link]")
        columns = page.locator("[data-column]")
        expect(columns).to_have_count(3)
        expect(columns.nth(0)).to_have_attribute("data-step", "0")
        expect(columns.nth(1)).to_have_attribute("data-step", "40")
        expect(columns.nth(1)).to_contain_text("peak")
        expect(columns.nth(2)).to_contain_text("after the cliff")
        expect(columns.nth(1)).to_contain_text("answer at 40")
        assert no_overflow(page)
        screenshot(page, "episodes-time.png")
        columns.nth(1).locator('a[data-sample="1"]').click()  # sample 1 in every column
        expect(page.locator("[data-column] a.is-open")).to_have_count(3)
        for i in range(3):
            expect(columns.nth(i).locator("a.is-open")).to_have_attribute("data-sample", "1")

        # A point of the panel's accuracy curve opens that evaluation's episodes.
        page.goto(f"{base}/dash/compare?runs={run_id}&key=eval/accuracy")
        page.wait_for_selector("#curves-graph .js-plotly-plot .scatterlayer .point")
        x, y = page.evaluate(
            """(step) => {
                const gd = document.querySelector('#curves-graph .js-plotly-plot');
                const t = gd.data.findIndex(d => d.mode === 'lines+markers');
                const i = gd.data[t].x.indexOf(step);
                const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
                const box = gd.getBoundingClientRect();
                return [box.left + xa._offset + xa.d2p(step),
                        box.top + ya._offset + ya.d2p(gd.data[t].y[i])];
            }""",
            60,
        )
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        page.wait_for_url(f"**/runs/{run_id}/episodes/?kind=eval&step=60&near=1")
        expect(page.locator("h1")).to_contain_text("step 60 · evaluation")
        assert errors == []


@pytest.fixture
def two_runs(alice, bob, tmp_path, monkeypatch):
    """A shared and a per-role run with the same probe problem; the shared one also records
    evaluator-optimizer and orchestrator-workers episodes (with a huge, odd completion)."""
    monkeypatch.setenv("DEBUG", "1")
    alice.set_password(PASSWORD)
    alice.save(update_fields=["password"])
    shared = make_experiment(alice, runs=1, sharing="shared").runs.get()
    per_role = make_experiment(bob, runs=1, sharing="per_role").runs.get()
    store.write_episodes(shared.id, probe(20, 0.25))
    store.write_episodes(per_role.id, probe(20, 1.0))
    huge = orch_workers(step=5, index=1, problem="p1", workers=3)
    huge["turns"][1]["completion"] = ("x\udcff\x00 " + "y" * 200) * 300
    store.write_episodes(
        shared.id, [eval_opt(step=5, rounds=((False, False), (False, True))), huge]
    )
    with live_troupe(tmp_path) as base:
        yield base, shared.id, per_role.id


def test_one_problem_in_two_runs_and_the_other_workflows(two_runs, chromium_path):
    base, shared, per_role = two_runs
    with chromium(chromium_path) as browser:
        page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
        page.goto(f"{base}/episodes/compare/?runs={shared},{per_role}")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("#login-form button[type=submit]")
        columns = page.locator("[data-column]")
        expect(columns).to_have_count(2)
        expect(columns.nth(0)).to_contain_text("shared")
        expect(columns.nth(0)).to_contain_text("1 of 2 samples correct")
        expect(columns.nth(1)).to_contain_text("per_role")
        expect(columns.nth(1)).to_contain_text("2 of 2 samples correct")
        assert no_overflow(page)
        screenshot(page, "episodes-runs.png")

        page.goto(
            f"{base}/runs/{shared}/episodes/?kind=train&step=5&outcome=evaluator_accepted_wrong"
        )
        episode = page.locator("#episode")
        expect(episode.locator("[data-workflow=evaluator-optimizer]")).to_be_visible()
        expect(episode.locator("[data-verdict=accepted]")).to_contain_text("wrongly")
        expect(episode).to_contain_text("↺ rejected: revise")
        assert no_overflow(page)
        screenshot(page, "episodes-eval-opt.png")

        page.goto(f"{base}/runs/{shared}/episodes/?kind=train&step=5")
        page.locator('#groups [data-group="p1"] .ep-card').click()
        expect(episode.locator("[data-workflow=orchestrator-workers]")).to_be_visible()
        expect(episode.locator(".ep-stage").nth(1).locator(".ep-turn")).to_have_count(3)
        expect(episode.locator(".ep-more summary").first).to_contain_text("more characters")
        assert no_overflow(page)
        screenshot(page, "episodes-orch.png")
