"""A probe problem in time (`/runs/<id>/episodes/time/`): at the base, the peak and after the
cliff from the run's summary, or at the steps asked, side by side; bad parameters are a 400."""

import re

import pytest

from tests.webapp.episode_records import accuracy, get, probe
from webapp.episodes import store

pytestmark = pytest.mark.django_db


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


@pytest.mark.parametrize(
    "query, name",
    [
        ("steps=a,b", "steps"),
        ("steps=1,2,3,4,5,6,7", "steps"),
        ("sample=-3", "sample"),
        ("problem=" + "p" * 201, "problem"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client, run, bob, query, name):
    html = get(client, bob, f"/runs/{run.id}/episodes/time/?{query}", status=400)
    assert f'data-bad-query="{name}"' in html


def test_a_problem_no_evaluation_recorded_says_so(client, run, bob):
    store.write_episodes(run.id, probe(run, 0, 1))
    html = get(client, bob, f"/runs/{run.id}/episodes/time/?problem=nowhere")
    assert "No evaluation of this run recorded <code>nowhere</code>" in html
    assert "data-column=" not in html
