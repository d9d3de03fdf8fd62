"""The run page's episode panel: what was recorded and the ways into the episode pages (a
step picker, the latest step, a probe problem in time, another run); sparklines carry the
scale a click maps back to a step."""

import pytest

from tests.webapp.episode_records import voting_step
from webapp.episodes import store
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def page(client, user, run):
    client.force_login(user)
    response = client.get(f"/runs/{run.id}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_run_without_episodes_says_so(client, run, bob):
    assert "No episodes recorded yet" in page(client, bob, run)


def test_the_panel_counts_and_links_into_the_episode_pages(client, run, bob):
    store.write_episodes(run.id, voting_step("train", 1) + voting_step("eval", 2, problems=1))
    html = page(client, bob, run).partition('id="episodes"')[2]
    assert "8 training and 4 evaluation episodes recorded" in html
    assert '<option value="train:1">' in html and '<option value="eval:2" selected>' in html
    for link in (
        f"/runs/{run.id}/episodes/",
        f"/runs/{run.id}/episodes/time/",
        f"/episodes/compare/?runs={run.id}",
    ):
        assert f'href="{link}"' in html
    assert "episode_links.js" in html


def test_sparklines_carry_their_step_range_for_clicks(client, run, bob):
    write_points(run.id, [("eval/accuracy", 0, 0.1), ("eval/accuracy", 40, 0.5)])
    html = page(client, bob, run)
    assert 'data-spark="eval/accuracy" data-first-step="0" data-last-step="40"' in html
    assert f'data-episodes-url="/runs/{run.id}/episodes/"' in html
