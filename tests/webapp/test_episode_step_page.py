"""The episode view of one step (`/runs/<id>/episodes/`): its GRPO groups and the opened
episode drawn as its workflow, filters, the gradient share when recorded, escaped and folded
texts, an empty state for a step without episodes, a 400 naming a bad parameter, and who may
see it."""

import re

import pytest

from tests.webapp.episode_records import (
    accuracy,
    eval_opt,
    get,
    orch_workers,
    single,
    voting,
    voting_step,
)
from webapp.episodes import store
from webapp.episodes.browse import FOLD_CHARS

pytestmark = pytest.mark.django_db


def opened(html: str) -> str:
    """The opened episode's section."""
    return html.partition('id="episode"')[2]


def test_the_latest_step_opens_with_its_groups_and_first_episode(client, run, bob):
    store.write_episodes(run.id, voting_step(step=1) + voting_step(step=2))
    html = get(client, bob, f"/runs/{run.id}/episodes/")
    assert "8 training episodes at step 2" in html
    assert html.count('data-group="') == 2
    episode = opened(html)
    assert 'data-workflow="voting"' in episode
    assert episode.count('data-turn="generator') == 3 and 'data-turn="aggregator"' in episode
    assert "voters" in episode and "aggregator" in episode
    assert episode.count("ep-card") >= 4  # its group's siblings


def test_each_workflow_is_drawn_by_its_stages(client, run, bob):
    store.write_episodes(
        run.id,
        [
            eval_opt(index=0, rounds=((False, False), (True, True))),
            orch_workers(index=1, problem="p1"),
            single(index=2, problem="p2"),
        ],
    )
    ids = {e.problem_id: e.id for e in run.episodes.all()}
    page = lambda pid: opened(get(client, bob, f"/runs/{run.id}/episodes/?episode={pid}"))  # noqa: E731
    evalopt = page(ids["p0"])
    assert "round 1: generator" in evalopt and "round 2: evaluator" in evalopt
    assert "↺ rejected: revise" in evalopt
    assert 'data-verdict="rejected"' in evalopt and 'data-verdict="accepted"' in evalopt
    orch = page(ids["p1"])
    assert re.search(r"orchestrator.*workers.*synthesizer", orch, re.S)
    assert 'data-workflow="single"' in page(ids["p2"])


def test_filters_keep_groups_whole_and_dim_the_rest(client, run, bob):
    store.write_episodes(run.id, voting_step(step=1))
    html = get(client, bob, f"/runs/{run.id}/episodes/?correct=incorrect")
    assert "4 matches" in html
    assert html.count("is-dimmed") >= 4  # the correct samples, dimmed beside them
    missed = get(client, bob, f"/runs/{run.id}/episodes/?outcome=aggregator_missed_correct")
    assert "4 matches" in missed
    none = get(client, bob, f"/runs/{run.id}/episodes/?outcome=evaluator_accepted_wrong")
    assert "data-no-match" in none


def test_the_evaluator_accepting_a_wrong_answer_is_found(client, run, bob):
    store.write_episodes(
        run.id,
        [
            eval_opt(index=0, rounds=((False, True),)),  # accepted a wrong proposal
            eval_opt(index=1, rounds=((True, False), (True, True))),  # rejected a right one
            eval_opt(index=2, rounds=((True, True),)),
        ],
    )
    html = get(client, bob, f"/runs/{run.id}/episodes/?outcome=evaluator_accepted_wrong")
    assert "1 match" in html
    assert "evaluator accepted a wrong answer" in opened(html)
    rejected = get(client, bob, f"/runs/{run.id}/episodes/?outcome=evaluator_rejected_correct")
    assert "1 match" in rejected


def test_an_answer_the_second_opinion_failed_is_marked_and_found(client, run, bob):
    # A passing answer an independent re-check failed (trainer/rollout.py).
    flagged = single(index=0, problem="p0")
    flagged["verdict_disagreement"] = True
    store.write_episodes(run.id, [flagged, single(index=1, problem="p1")])
    html = get(client, bob, f"/runs/{run.id}/episodes/?outcome=verdict_disagreement")
    assert "1 match" in html
    assert "reward hacking suspected" in opened(html)


def test_truncated_and_text_search(client, run, bob):
    store.write_episodes(
        run.id,
        [
            single(index=0, completion="plain"),
            single(index=1, problem="p1", completion="needle here"),
        ],
    )
    cut = single(index=2, problem="p2")
    cut["turns"][0]["truncated"] = True
    store.write_episodes(run.id, [cut])
    assert "1 match" in get(client, bob, f"/runs/{run.id}/episodes/?truncated=1")
    found = get(client, bob, f"/runs/{run.id}/episodes/?q=NEEDLE")
    assert "1 match" in found and "needle here" in opened(found)


def test_a_gradient_share_is_shown_and_sorts_when_present(client, run, bob):
    store.write_episodes(
        run.id,
        [
            voting(index=0, grad_share={"generator": 0.05}),
            voting(index=1, sample=1, grad_share={"generator": 0.23}),
            voting(index=2, sample=2),  # recorded before shares existed
        ],
    )
    html = get(client, bob, f"/runs/{run.id}/episodes/?sort=share:generator")
    assert "carried 23% of the generator&#x27;s gradient" in html
    first = re.search(r'data-group="p0">.*?data-sample="(\d)"', html, re.S).group(1)
    assert first == "1"
    assert "share of the generator" in html  # offered in the order menu


def test_text_is_escaped_and_long_or_odd_completions_fold(client, run, bob):
    long = "a" * FOLD_CHARS + "TAIL" + "b" * 40_000
    store.write_episodes(
        run.id,
        [
            single(index=0, completion="<script>alert('x')</script>"),
            single(index=1, completion=long),
            single(index=2, completion="bad \udcff byte \x00"),
        ],
    )
    ids = sorted(run.episodes.values_list("id", flat=True))
    html = get(client, bob, f"/runs/{run.id}/episodes/?episode={ids[0]}")
    assert "<script>alert(" not in html and "&lt;script&gt;alert(" in html
    folded = opened(get(client, bob, f"/runs/{run.id}/episodes/?episode={ids[1]}"))
    before = folded.partition("TAIL")[0]
    assert "more characters</summary>" in before[-300:]
    get(client, bob, f"/runs/{run.id}/episodes/?episode={ids[2]}")


def test_a_step_without_episodes_is_an_empty_state_with_the_nearest(client, run, bob):
    store.write_episodes(run.id, voting_step(step=10) + voting_step(step=20))
    html = get(client, bob, f"/runs/{run.id}/episodes/?kind=train&step=14")
    assert "No training episodes at step 14" in html and "data-episodes-empty" in html
    assert f"/runs/{run.id}/episodes/?kind=train&amp;step=10" in html
    near = get(client, bob, f"/runs/{run.id}/episodes/?kind=train&step=14&near=1")
    assert "the nearest is 10" in near and "8 training episodes at step 10" in near


def test_a_run_without_episodes_says_so(client, run, bob):
    assert "recorded no episodes" in get(client, bob, f"/runs/{run.id}/episodes/")
    assert "recorded no episodes yet" in get(client, bob, f"/runs/{run.id}/episodes/time/")


@pytest.mark.parametrize(
    "query, name",
    [
        ("step=-1", "step"),
        ("step=abc", "step"),
        ("step=" + "9" * 40, "step"),
        ("kind=bogus", "kind"),
        ("at=bogus:3", "kind"),
        ("correct=maybe", "correct"),
        ("outcome=<b>x</b>", "outcome"),
        ("sort=sideways", "sort"),
        ("episode=x", "episode"),
        ("q=" + "x" * 300, "q"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client, run, bob, query, name):
    store.write_episodes(run.id, voting_step(step=1))
    html = get(client, bob, f"/runs/{run.id}/episodes/?{query}", status=400)
    assert f'data-bad-query="{name}"' in html


def test_an_unknown_run_is_a_404_and_a_stranger_signs_in_first(client, run, bob):
    get(client, bob, f"/runs/{run.id + 99}/episodes/", status=404)
    get(client, bob, f"/episodes/compare/?runs={run.id},{run.id + 99}", status=404)
    client.logout()
    for url in (
        f"/runs/{run.id}/episodes/",
        f"/runs/{run.id}/episodes/time/",
        f"/episodes/compare/?runs={run.id}",
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_step_zero_is_linked_as_step_zero(client, run, bob):
    store.write_episodes(run.id, voting_step(step=0) + voting_step(step=5))
    html = get(client, bob, f"/runs/{run.id}/episodes/?kind=train&step=0")
    assert "8 training episodes at step 0" in html
    assert "kind=train&amp;step=0&amp;episode=" in html  # the cards open step 0's episodes


def test_the_runs_peak_and_cliff_are_a_click_away(client, run, bob):
    accuracy(run, [0.2, 0.5, 0.8, 0.82, 0.8, 0.3, 0.1, 0.1, 0.12, 0.1])
    store.write_episodes(run.id, voting_step(step=30))
    html = get(client, bob, f"/runs/{run.id}/episodes/")
    marks = html.partition("data-landmarks")[2].partition("</p>")[0]
    assert "peak (step 30)" in marks and "cliff onset" in marks
    assert "kind=eval&amp;step=30&amp;near=1" in marks
