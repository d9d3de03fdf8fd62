"""The episode pages: a step's GRPO groups and an episode drawn as its workflow, filters,
a probe problem at base/peak/after the cliff, one problem in two runs, and bad input (a 400
naming the parameter, an empty state for a step without episodes, never a 500)."""

import re

import pytest

from tests.people import make_experiment
from tests.webapp.episode_records import eval_opt, orch_workers, single, voting, voting_step
from webapp.episodes import store
from webapp.episodes.browse import FOLD_CHARS
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def get(client, user, url, status=200):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    return response.content.decode()


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


@pytest.mark.parametrize(
    "url",
    [
        "/runs/{run}/episodes/time/?steps=a,b",
        "/runs/{run}/episodes/time/?steps=1,2,3,4,5,6,7",
        "/runs/{run}/episodes/time/?sample=-3",
        "/episodes/compare/?runs=1;2",
        "/episodes/compare/?runs={run}&step=x",
    ],
)
def test_the_comparisons_refuse_bad_parameters(client, run, bob, url):
    get(client, bob, url.format(run=run.id), status=400)


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


def accuracy(run, values):
    """`values` every 10 steps, with the SE a run logs beside them (the cliff's noise test)."""
    points = [(key, 10 * i, v) for i, v in enumerate(values) for key in ("eval/accuracy",)]
    write_points(run.id, points + [("eval/accuracy_se", 10 * i, 0.02) for i in range(len(values))])


def probe(run, step, right, problem="q7"):
    """An evaluation's 2 samples of `problem`, `right` of them correct, marked by step."""
    return [
        voting("eval", step, s, problem, s, correct=s < right, text=f"\\boxed{{at {step}}}")
        for s in range(2)
    ]


def test_a_probe_problem_at_base_peak_and_after_the_cliff(client, run, bob):
    accuracy(run, [0.2, 0.5, 0.8, 0.82, 0.8, 0.3, 0.1, 0.1, 0.12, 0.1])
    store.write_episodes(run.id, [r for s in range(0, 100, 10) for r in probe(run, s, s // 40)])
    html = get(client, bob, f"/runs/{run.id}/episodes/time/")
    titles = re.findall(r'data-column="([^"]+)" data-step="(\d+)"', html)
    assert [t[0].split(" ")[0] for t in titles] == ["base", "peak", "after"]
    assert titles[0][1] == "0" and titles[1][1] == "30" and int(titles[2][1]) >= 50
    assert "at 30" in html and "at 0" in html
    chosen = get(client, bob, f"/runs/{run.id}/episodes/time/?steps=20,40,45&sample=1")
    assert re.findall(r'data-column="(step \d+)"', chosen) == ["step 20", "step 40", "step 45"]
    assert "Not recorded at step 45" in chosen and "data-column-empty" in chosen


def test_a_run_without_a_cliff_shows_its_last_evaluation(client, run, bob):
    accuracy(run, [0.2, 0.3, 0.4])
    store.write_episodes(run.id, [r for s in (0, 10, 20) for r in probe(run, s, 1)])
    html = get(client, bob, f"/runs/{run.id}/episodes/time/")
    assert 'data-column="peak (step 20) · last evaluation" data-step="20"' in html


def test_one_problem_in_two_runs_side_by_side(client, alice, bob):
    shared = make_experiment(alice, runs=1, sharing="shared").runs.get()
    per_role = make_experiment(bob, runs=1, sharing="per_role").runs.get()
    store.write_episodes(shared.id, probe(shared, 10, 0) + probe(shared, 20, 0))
    store.write_episodes(per_role.id, probe(per_role, 20, 2) + probe(per_role, 30, 2))
    html = get(client, bob, f"/episodes/compare/?runs={shared.id},{per_role.id}")
    columns = re.findall(r'data-column="([^"]+)" data-step="(\d*)"', html)
    assert columns == [(f"run {shared.id} · shared", "20"), (f"run {per_role.id} · per_role", "20")]
    assert "0 of 2 samples correct" in html and "2 of 2 samples correct" in html
    other = get(client, bob, f"/episodes/compare/?runs={shared.id},{per_role.id}&step=30")
    assert "Not recorded at this step" in other
    assert "Give two run ids" in get(client, bob, "/episodes/compare/")
