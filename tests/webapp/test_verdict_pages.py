"""Every page that shows a verdict shows its threshold and evidence, and the statistics page
says "not enough seeds" when a cell has fewer than 3."""

from __future__ import annotations

import math

import pytest
from django.utils.html import escape

from analysis.cliffs import summarize_accuracy
from tests.stats_runs import ACCURACY_STEPS, stored_run
from webapp.dashboards import components, tables
from webapp.experiments.models import Experiment, Run
from webapp.runs.summaries import clear_cache, run_summaries
from webapp.stats import page as stats_page

pytestmark = pytest.mark.django_db

# The collapse: voting on math, 0.067 → 0.000, evaluated on 256 problems.
COLLAPSE = [0.04, 0.05, 0.06, 0.067, 0.06, 0.02, 0.0, 0.0, 0.0, 0.0]
SE = [math.sqrt(a * (1 - a) / 256) for a in COLLAPSE]


@pytest.fixture(autouse=True)
def fresh_caches():
    clear_cache()
    stats_page._cache.clear()


@pytest.fixture
def collapsed(alice) -> Run:
    experiment = Experiment.objects.create(owner=alice, name="Collapse", preset="cpu-demo")
    se = [("eval/accuracy_se", s, e) for s, e in zip(ACCURACY_STEPS, SE, strict=True)]
    return stored_run(experiment, seed=0, sharing="per_role", accuracy=COLLAPSE, extra=se)


def expected():
    return summarize_accuracy(list(ACCURACY_STEPS), COLLAPSE, se=SE)


def test_the_run_page_shows_the_cliff_with_its_threshold_and_test(client, collapsed, alice):
    client.force_login(alice)
    html = client.get(f"/runs/{collapsed.id}/").content.decode()
    accuracy = expected()
    assert accuracy["cliff_status"] == "cliff"
    assert f"cliff @{accuracy['cliff_onset']}" in html
    assert f"below {accuracy['threshold']:.3f}" in html
    assert f'title="{escape(accuracy["evidence"])}"' in html
    assert "Cliff test: " + escape(accuracy["evidence"]) in html


def test_a_run_too_short_for_a_verdict_shows_no_threshold(client, alice):
    """Two evaluations give no verdict, and their threshold can be negative (noise larger
    than the peak): the pages say "too few evaluations" and show no "below -0.032"."""
    experiment = Experiment.objects.create(owner=alice, name="Short", preset="cpu-demo")
    run = stored_run(
        experiment,
        seed=0,
        sharing="shared",
        accuracy=None,
        extra=[("eval/accuracy", 0, 0.125), ("eval/accuracy", 10, 0.25)],
    )
    client.force_login(alice)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "too few evaluations" in page and "below " not in page
    listing = client.get(f"/experiments/{experiment.id}/").content.decode()
    assert "too few evaluations" in listing and "below " not in listing


def test_the_experiment_page_shows_each_runs_threshold_and_evidence(client, collapsed, alice):
    client.force_login(alice)
    html = client.get(f"/experiments/{collapsed.experiment_id}/").content.decode()
    accuracy = expected()
    assert f"below {accuracy['threshold']:.3f}" in html
    assert f'title="{escape(accuracy["evidence"])}"' in html


def test_the_dash_run_table_has_a_threshold_column_and_the_evidence_on_hover(collapsed):
    summaries = run_summaries([collapsed])
    (row,) = tables.run_rows([collapsed], summaries)
    accuracy = expected()
    assert row["cliff"] == f"cliff @{accuracy['cliff_onset']}" and row["cliff_status"] == "cliff"
    assert row["cliff_threshold"] == pytest.approx(accuracy["threshold"])
    table = components.render_table(tables.RUN_COLUMNS, [row])
    cells = table.children[1].children[0].children
    by_column = dict(zip([c.id for c in tables.RUN_COLUMNS], cells, strict=True))
    assert by_column["cliff"].title == accuracy["evidence"]
    assert by_column["cliff_threshold"].children == f"{accuracy['threshold']:.3f}"


def test_the_gradients_table_asks_capture_only_of_shared_runs_with_two_roles(alice):
    experiment = Experiment.objects.create(owner=alice, name="Single", preset="cpu-demo")
    shares = [("role/solver/grad_share", s, 1.0) for s in range(30)]
    run = stored_run(experiment, seed=0, sharing="shared", accuracy=COLLAPSE, extra=shares)
    summaries = run_summaries([run])
    assert summaries[run.id]["capture"] is None
    (row,) = tables.dynamics_rows([run], summaries)
    assert row["captured"] == "— (own policy)"
    assert "shared" not in " ".join(tables.dynamics_findings([run], summaries))


# --- statistics: not enough seeds ---------------------------------------------------------------


@pytest.fixture
def one_seed(alice) -> Experiment:
    """The issue's experiment: one seed a cell, differences −0.012 (single), +0.029 (voting)."""
    experiment = Experiment.objects.create(owner=alice, name="One seed", preset="cpu-demo")
    for workflow, shared, per_role in (("single", 0.5, 0.488), ("voting", 0.5, 0.529)):
        for sharing, peak in (("shared", shared), ("per_role", per_role)):
            curve = [0.2, (0.2 + peak) / 2] + [peak] * 8
            stored_run(experiment, seed=0, sharing=sharing, workflow=workflow, accuracy=curve)
    return experiment


def test_one_seed_per_cell_says_not_enough_data_and_plans_two_more(client, one_seed, bob):
    client.force_login(bob)
    stats = client.get(f"/api/v1/experiments/{one_seed.id}/stats").json()
    overall = stats["sharing"]["overall"]["peak"]
    assert overall["low"] is None and overall["decision"] == "insufficient"
    for cell in stats["sharing"]["cells"]:
        assert cell["insufficient"] and cell["plan"]["to_queue"] == 2
        assert cell["peak"]["decision"] == "insufficient"
    assert stats["plan"]["seeds"] == 4 and stats["plan"]["insufficient_cells"] == 2
    sentence = stats["verdicts"]["sharing"]
    assert "not enough data" in sentence and "No cell is undecided" not in sentence
    assert "[+0.009, +0.009]" not in sentence and "per_role higher" not in sentence

    html = client.get(f"/experiments/{one_seed.id}/stats/").content.decode()
    assert "not enough seeds" in html
    assert escape(sentence) in html
    assert "data-cliff-rule" in html


def test_queue_more_seeds_queues_exactly_what_the_plan_asks_for(
    client, one_seed, alice, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    planned = stats_page.experiment_stats(one_seed)["plan"]
    with django_capture_on_commit_callbacks():
        response = client.post(f"/experiments/{one_seed.id}/stats/queue/", follow=True)
    assert response.status_code == 200
    queued = Run.objects.filter(experiment=one_seed, status=Run.QUEUED)
    assert queued.count() == planned["runs"] == 8
    for workflow in ("single", "voting"):
        for sharing in ("shared", "per_role"):
            seeds = sorted(
                queued.filter(workflow=workflow, sharing=sharing).values_list("seed", flat=True)
            )
            assert seeds == [1, 2]
    # Pressed again, the queued seeds are on the way: nothing more.
    stats_page._cache.clear()
    assert stats_page.experiment_stats(one_seed)["plan"]["seeds"] == 0


def test_a_large_fall_over_few_evaluations_reads_possible_cliff_everywhere(client, alice):
    # 0.3, 0.5, 0.6, 0.2, 0.1, 0.1 with no SE: the drop's p is 0.087, which once read "none".
    experiment = Experiment.objects.create(owner=alice, name="Short fall", preset="cpu-demo")
    points = [("eval/accuracy", 10 * i, a) for i, a in enumerate([0.3, 0.5, 0.6, 0.2, 0.1, 0.1])]
    run = stored_run(experiment, seed=0, sharing="shared", accuracy=None, extra=points)
    label = "possible cliff: too few evaluations to confirm"
    client.force_login(alice)
    assert label in client.get(f"/runs/{run.id}/").content.decode()
    assert label in client.get(f"/experiments/{experiment.id}/").content.decode()
    live = client.get(f"/runs/{run.id}/live.json").json()
    assert any(label in block for block in live["blocks"].values())
    (row,) = tables.run_rows([run], run_summaries([run]))
    assert row["cliff_status"] == "possible" and row["cliff"] == label
