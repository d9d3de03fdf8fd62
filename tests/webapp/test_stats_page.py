"""The statistics page of an experiment, its "queue more seeds" button and its JSON twin, on
hand-built stored runs whose answers are known (tests/stats_runs.py): a clear effect, no
effect, no difference at all, and the states with too few runs to say anything."""

import pytest
from django.utils.html import escape

from tests.people import bearer
from tests.stats_runs import amplified, cliff, flat, sharing_pairs, stored_run
from webapp.experiments.models import Experiment, Run
from webapp.runs.summaries import clear_cache
from webapp.stats import page as stats_page
from webapp.stats.templatetags.stats_format import signed

pytestmark = pytest.mark.django_db

# per_role − shared on peak: mean +0.03, SD 0.0476 over 4 pairs; the bootstrap interval
# includes 0 (all four resampled from {−0.02, 0} has chance 1/16 > 2.5%), and a paired test
# would need ⌈(2.8016 · 0.0476 / 0.03)²⌉ = 20 pairs: 16 more.
NO_EFFECT = [0.08, -0.02, 0.06, 0.0]
CLEAR = [0.2, 0.22, 0.19, 0.21]  # per_role peaks at 0.7–0.72, shared runs fall off a cliff


@pytest.fixture(autouse=True)
def fresh_caches():
    clear_cache()
    stats_page._cache.clear()


def experiment_of(owner, name) -> Experiment:
    return Experiment.objects.create(owner=owner, name=name, preset="cpu-demo")


@pytest.fixture
def no_effect(alice) -> Experiment:
    experiment = experiment_of(alice, "No effect")
    sharing_pairs(experiment, NO_EFFECT)
    return experiment


@pytest.fixture
def clear_effect(alice) -> Experiment:
    experiment = experiment_of(alice, "Clear effect")
    sharing_pairs(experiment, CLEAR, shared_cliff=True, onset=25)
    return experiment


def page(client, experiment) -> str:
    response = client.get(f"/experiments/{experiment.id}/stats/")
    assert response.status_code == 200
    return response.content.decode()


# --- who may see and do what -------------------------------------------------------------------


def test_an_outsider_is_sent_to_sign_in_and_the_api_says_401(client, no_effect):
    assert client.get(f"/experiments/{no_effect.id}/stats/").status_code == 302
    assert client.post(f"/experiments/{no_effect.id}/stats/queue/").status_code == 302
    response = client.get(f"/api/v1/experiments/{no_effect.id}/stats")
    assert response.status_code == 401 and "error" in response.json()
    assert no_effect.runs.count() == 8


def test_a_teammate_reads_the_page_but_gets_no_button_and_may_not_queue(client, no_effect, bob):
    client.force_login(bob)

    html = page(client, no_effect)
    assert "Statistics across seeds" in html and 'id="queue-seeds"' not in html

    assert client.post(f"/experiments/{no_effect.id}/stats/queue/").status_code == 403
    assert no_effect.runs.count() == 8


def test_staff_may_queue_seeds_for_anyones_experiment(client, no_effect, carol):
    client.force_login(carol)

    client.post(f"/experiments/{no_effect.id}/stats/queue/")

    assert no_effect.runs.filter(status=Run.QUEUED).count() == 32


def test_queueing_takes_a_post_with_the_csrf_token(no_effect, alice):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    assert browser.get(f"/experiments/{no_effect.id}/stats/queue/").status_code == 405
    assert browser.post(f"/experiments/{no_effect.id}/stats/queue/").status_code == 403
    assert no_effect.runs.count() == 8


def test_the_api_only_reads(client, no_effect, alice):
    response = client.post(f"/api/v1/experiments/{no_effect.id}/stats", **bearer(alice))

    assert response.status_code == 405 and response["Allow"] == "GET"
    assert client.get(f"/api/v1/experiments/{no_effect.id}/stats/", **bearer(alice)).json()


def test_an_unknown_experiment_is_a_404(client, bob):
    client.force_login(bob)

    assert client.get("/experiments/999999/stats/").status_code == 404
    assert client.get("/api/v1/experiments/999999/stats").status_code == 404


def test_the_experiment_page_links_to_its_statistics(client, no_effect, bob):
    client.force_login(bob)

    html = client.get(f"/experiments/{no_effect.id}/").content.decode()

    assert f'href="/experiments/{no_effect.id}/stats/"' in html


# --- no effect ---------------------------------------------------------------------------------


def test_no_effect_leaves_the_cell_undecided_with_the_seeds_it_needs(client, no_effect, bob):
    client.force_login(bob)

    stats = client.get(f"/api/v1/experiments/{no_effect.id}/stats").json()
    cell = stats["sharing"]["cells"][0]
    assert (cell["workflow"], cell["task"], cell["model"]) == ("voting", "math", "tiny-s")
    assert cell["n_pairs"] == 4 and cell["seeds"] == [0, 1, 2, 3]
    for metric in ("peak", "final"):
        effect = cell[metric]
        assert effect["mean"] == pytest.approx(0.03)
        assert effect["low"] < 0 < effect["high"]
        assert effect["decision"] == "undecided"
        assert (effect["n_needed"], effect["more_needed"]) == (20, 16)
    assert cell["cliff"]["mean"] == 0 and cell["cliff"]["more_needed"] is None
    assert cell["undecided"] and cell["plan"] == {
        "wanted": 16,
        "pending": 0,
        "to_queue": 16,
        "reason": "undecided",
    }
    assert stats["plan"] == {
        "undecided_cells": 1,
        "insufficient_cells": 0,
        "seeds": 16,
        "runs": 32,
        "max_runs": 50,
    }
    assert stats["state"] == "ok" and stats["runs"]["counted"] == 8

    html = page(client, no_effect)
    assert "needs ~20 pairs (+16)" in html
    assert escape(stats["verdicts"]["sharing"]) in html
    assert stats["verdicts"]["sharing"] == (
        "Over 4 pairs in 1 cell, per_role − shared: peak accuracy +0.030 "
        f"[{signed(cell['peak']['low'])}, {signed(cell['peak']['high'])}] (undecided: interval "
        f"straddles 0); final accuracy +0.030 [{signed(cell['final']['low'])}, "
        f"{signed(cell['final']['high'])}] (undecided: interval straddles 0); cliff rate: no "
        "cliffs in any run. Undecided in 1 of 1 cell (on peak accuracy, final accuracy): "
        "resolving them takes about 16 more seeds (32 runs)."
    )


def test_the_button_queues_the_missing_seeds_of_both_modes_once(
    client, no_effect, alice, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    assert 'id="queue-seeds"' in page(client, no_effect)

    with django_capture_on_commit_callbacks() as sends:
        response = client.post(f"/experiments/{no_effect.id}/stats/queue/", follow=True)

    assert len(sends) == 1  # one send of all new runs, after the commit
    queued = no_effect.runs.filter(status=Run.QUEUED)
    assert queued.count() == 32
    for sharing in ("shared", "per_role"):
        seeds = sorted(queued.filter(sharing=sharing).values_list("seed", flat=True))
        assert seeds == list(range(4, 20))
    template = no_effect.runs.get(seed=0, sharing="per_role")
    new = queued.get(seed=7, sharing="per_role")
    assert {**new.config, "seed": 0} == template.config and new.config["seed"] == 7
    assert (new.workflow, new.task, new.model, new.queue) == ("voting", "math", "tiny-s", "cpu")
    html = response.content.decode()
    assert "Queued 32 runs (both sharing modes) — voting × math × tiny-s: seeds 4–19." in html

    # The queued seeds are on the way: pressing again queues nothing.
    response = client.post(f"/experiments/{no_effect.id}/stats/queue/", follow=True)
    assert no_effect.runs.count() == 40
    assert "Nothing to queue" in response.content.decode()
    assert "16 on the way" in response.content.decode()


def test_one_press_queues_at_most_fifty_runs_and_says_so(client, alice):
    experiment = experiment_of(alice, "Tiny effect")
    sharing_pairs(experiment, [0.05, -0.04, 0.03, -0.03])  # mean 0.0025: ~2,460 pairs needed
    client.force_login(alice)

    response = client.post(f"/experiments/{experiment.id}/stats/queue/", follow=True)

    assert experiment.runs.filter(status=Run.QUEUED).count() == 50
    html = response.content.decode()
    assert "Queued 50 runs" in html and "One press queues at most 50 runs" in html
    assert "press again to queue the rest" in html


def test_identical_modes_are_undecided_but_give_no_seed_estimate(client, alice):
    experiment = experiment_of(alice, "Identical")
    sharing_pairs(experiment, [0.0, 0.0, 0.0])
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()
    cell = stats["sharing"]["cells"][0]
    assert cell["peak"]["decision"] == "undecided" and cell["peak"]["low"] == 0
    assert cell["peak"]["n_needed"] is None
    assert cell["plan"]["to_queue"] == 0 and "no difference observed" in cell["plan"]["reason"]
    assert "no difference seen" in page(client, experiment)

    response = client.post(f"/experiments/{experiment.id}/stats/queue/", follow=True)
    assert "Nothing to queue" in response.content.decode()
    assert experiment.runs.count() == 6


# --- a clear effect ----------------------------------------------------------------------------


def test_a_clear_effect_is_decided_and_the_button_queues_nothing(client, clear_effect, alice):
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{clear_effect.id}/stats").json()
    cell = stats["sharing"]["cells"][0]
    assert cell["peak"]["decision"] == "second_higher" and cell["peak"]["low"] > 0
    assert cell["peak"]["verdict"] == "per_role higher"
    assert cell["peak"]["mean"] == pytest.approx(0.105)
    assert cell["final"]["mean"] == pytest.approx(0.605)  # shared runs end at 0.1
    assert cell["cliff"]["mean"] == -1 and cell["cliff"]["decision"] == "first_higher"
    assert not cell["undecided"] and cell["plan"]["to_queue"] == 0
    assert "per_role higher" in page(client, clear_effect)

    response = client.post(f"/experiments/{clear_effect.id}/stats/queue/", follow=True)

    assert "Nothing to queue" in response.content.decode()
    assert clear_effect.runs.count() == 8


def test_amplification_before_every_cliff_is_more_than_chance(client, clear_effect, bob):
    client.force_login(bob)

    stats = client.get(f"/api/v1/experiments/{clear_effect.id}/stats").json()
    lead = stats["lead"]
    assert (lead["n_cliffs"], lead["n"], lead["n_precede"]) == (4, 4, 4)
    assert lead["leads"] == [15, 15, 15, 15] and lead["lead_median"] == 15
    # A random onset lies before the cliff (step 40 of steps 0–99) with chance 0.4: 0.4⁴.
    assert lead["null_fraction"] == pytest.approx(0.4)
    assert lead["p_fraction_exact"] == pytest.approx(0.0256)
    assert lead["decision"] == "precedes"
    assert lead["histogram"] == [{"low": 15, "high": 15, "count": 4}]
    assert stats["verdicts"]["lead"] == (
        "Among 4 runs with a cliff, amplification preceded it in 4 (median lead 15 steps); "
        "placing onsets at random steps gives this or more 2.6% of the time: amplification "
        "tends to come first."
    )
    assert escape(stats["verdicts"]["lead"]) in page(client, clear_effect)


def test_amplification_after_the_cliff_is_not_distinguishable_from_chance(client, alice):
    experiment = experiment_of(alice, "Late amplification")
    for seed in range(3):
        stored_run(experiment, seed=seed, sharing="shared", accuracy=cliff(), extra=amplified(60))
    stored_run(experiment, seed=3, sharing="shared", accuracy=cliff())  # no amplification
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()

    assert stats["lead"]["decision"] == "not_shown" and stats["lead"]["leads"] == [-20] * 3
    assert stats["verdicts"]["lead"] == (
        "Among 3 runs with a cliff, amplification preceded it in 0 (median lead −20 steps); "
        "placing onsets at random steps gives this or more 100% of the time: not "
        "distinguishable from chance with these runs. 1 more run with a cliff showed no "
        "amplification and is left out."
    )


# --- too few runs to say -----------------------------------------------------------------------


def test_an_experiment_without_finished_runs_says_so(client, alice):
    experiment = experiment_of(alice, "Waiting")
    stored_run(experiment, seed=0, sharing="shared", accuracy=None, status=Run.QUEUED)
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()
    html = page(client, experiment)

    assert stats["state"] == "no_runs" and stats["runs"]["pending"] == 1
    assert stats["verdicts"]["sharing"] == "No run has succeeded yet (1 run queued or running)."
    assert stats["verdicts"]["lead"] == (
        "No finished run has a cliff, so there is nothing to test yet."
    )
    assert "No axis has two levels" in html and 'id="queue-seeds"' not in html


def test_runs_of_one_sharing_mode_have_no_pairs(client, alice):
    experiment = experiment_of(alice, "Shared only")
    for seed in range(3):
        stored_run(experiment, seed=seed, sharing="shared", accuracy=flat(0.5))
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()

    assert stats["state"] == "no_pairs" and stats["sharing"]["unpaired"] == 3
    assert "No per_role/shared pairs yet" in page(client, experiment)


def test_failed_cancelled_and_branch_runs_are_left_out(client, no_effect, alice):
    stored_run(no_effect, seed=9, sharing="shared", accuracy=flat(0.9), status=Run.FAILED)
    stored_run(no_effect, seed=9, sharing="per_role", accuracy=flat(0.1), status=Run.CANCELLED)
    parent = no_effect.runs.get(seed=0, sharing="per_role")
    branch = stored_run(no_effect, seed=0, sharing="per_role", accuracy=flat(0.9))
    branch.parent = parent
    branch.branch_step = 50
    branch.save()
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{no_effect.id}/stats").json()

    assert stats["runs"]["counted"] == 8 and stats["runs"]["total"] == 11
    assert stats["runs"]["left_out"] == {
        "failed": 1,
        "cancelled": 1,
        "branches": 1,
        "duplicates": [],
    }
    assert stats["sharing"]["cells"][0]["peak"]["mean"] == pytest.approx(0.03)
    # Seeds the failed runs used are taken: the next press starts above them.
    client.post(f"/experiments/{no_effect.id}/stats/queue/")
    assert min(no_effect.runs.filter(status=Run.QUEUED).values_list("seed", flat=True)) == 10


def test_main_effects_compare_the_levels_of_each_axis(client, alice):
    experiment = experiment_of(alice, "Two workflows")
    for seed in range(3):
        stored_run(experiment, seed=seed, sharing="shared", accuracy=flat(0.3 + seed / 100))
        stored_run(
            experiment,
            seed=seed,
            sharing="shared",
            accuracy=flat(0.7 + seed / 100),
            workflow="single",
        )
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()

    rows = {row["level"]: row for row in stats["main_effects"]["workflow"]["peak"]}
    assert rows["single"]["effect"] == pytest.approx(0.2)
    assert rows["single"]["decision"] == "above" and rows["voting"]["decision"] == "below"
    assert list(stats["main_effects"]) == ["workflow"]  # the only axis with two levels
    assert "single above the average of workflow" in page(client, experiment)


def test_the_numbers_are_the_same_on_every_request(client, no_effect, bob):
    client.force_login(bob)
    first = client.get(f"/api/v1/experiments/{no_effect.id}/stats").json()
    clear_cache()
    stats_page._cache.clear()

    second = client.get(f"/api/v1/experiments/{no_effect.id}/stats", **bearer(bob)).json()

    assert first == second


def test_cells_of_external_runs_get_no_seeds_and_say_why(client, no_effect, alice):
    no_effect.runs.update(external=True)  # logged from elsewhere: Troupe cannot train more
    client.force_login(alice)

    response = client.post(f"/experiments/{no_effect.id}/stats/queue/", follow=True)

    assert no_effect.runs.count() == 8
    assert (
        "Nothing queued for voting × math × tiny-s: no run of this cell was trained here."
        in response.content.decode()
    )


def test_one_question_gets_one_answer_on_the_page(client, alice):
    # per_role − shared is +0.2 in voting and −0.2 in single: the paired section says the
    # cells disagree, and Main effects must not pool them into an interval of their own.
    experiment = experiment_of(alice, "Opposite cells")
    sharing_pairs(experiment, [0.2, 0.21, 0.19], shared=0.4)
    sharing_pairs(experiment, [-0.2, -0.21, -0.19], shared=0.4, workflow="single")
    client.force_login(alice)

    stats = client.get(f"/api/v1/experiments/{experiment.id}/stats").json()

    assert stats["sharing"]["overall"]["peak"]["decision"] == "disagree"
    for row in stats["main_effects"]["sharing"]["peak"]:
        assert row["low"] is None and row["decision"] == "paired"
        assert row["verdict"] == "paired by seed above: cells disagree: see each cell"
    # The workflow axis is a question the paired section does not answer: it keeps its own
    # guard, which sees per_role and shared disagree about voting against single.
    for row in stats["main_effects"]["workflow"]["peak"]:
        assert row["decision"] == "disagree" and row["low"] is None
    html = page(client, experiment)
    assert "paired by seed above: cells disagree: see each cell" in html
