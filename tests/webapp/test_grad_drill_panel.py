"""The run page's gradient drill-down: per role, the recorded steps with the largest gradient
norm, each linked to that step's episodes ordered by their share of the role's gradient."""

import pytest

from tests.webapp.test_api_episodes import record
from webapp.episodes import store
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def test_the_run_page_links_a_roles_gradient_spikes_to_the_episodes_that_carried_it(
    client, run, bob
):
    # Episodes recorded at steps 2, 4, 6; the solver's norm spikes at 4, then 6, then 2.
    store.write_episodes(
        run.id,
        [record("train", s, i, grad_share={"solver": 0.5}) for s in (2, 4, 6) for i in (0, 1)],
    )
    norms = {1: 9.0, 2: 1.0, 3: 8.0, 4: 5.0, 5: 7.0, 6: 3.0}  # odd steps have no episodes
    write_points(run.id, [("role/solver/grad_norm", s, v) for s, v in norms.items()])
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="grad-drill"' in page
    assert "episodes that carried solver's gradient at step 4" in page
    first = page.index('data-step="4"')
    assert first < page.index('data-step="6"') < page.index('data-step="2"')
    assert f'href="/runs/{run.id}/episodes/?kind=train&amp;step=4&amp;sort=share%3Asolver"' in page
    api = f"/api/v1/runs/{run.id}/episodes?kind=train&amp;step=4&amp;order=grad_share%3Asolver"
    assert f'href="{api}"' in page
    # The API link answers with that order.
    response = client.get(api.replace("&amp;", "&"))
    assert response.status_code == 200 and response.json()["count"] == 2


def test_a_run_without_shares_says_how_to_get_them(client, run, bob):
    client.force_login(bob)
    assert "No training episodes recorded yet" in client.get(f"/runs/{run.id}/").content.decode()
    store.write_episodes(run.id, [record("train", 1, 0)])
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "set <code>episodes_grad_share</code>" in page


def test_a_step_whose_recorded_episodes_carried_no_gradient_gets_no_link(client, run, bob):
    # The aggregator's norm is largest at step 4, but every recorded episode there carried 0%
    # of its gradient (once 5 of 6 links opened such groups). Only step 2 is offered, and
    # the page says why step 4 is not.
    store.write_episodes(
        run.id,
        [record("train", 2, i, grad_share={"aggregator": 0.3}) for i in (0, 1)]
        + [record("train", 4, i, grad_share={"aggregator": 0.0}) for i in (0, 1)],
    )
    write_points(
        run.id, [("role/aggregator/grad_norm", 2, 1.0), ("role/aggregator/grad_norm", 4, 5.0)]
    )
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'data-step="2"' in page and 'data-step="4"' not in page
    assert "1 step with a larger norm left out" in page


def test_a_role_no_recorded_episode_carried_says_why_there_is_no_link(client, run, bob):
    store.write_episodes(
        run.id, [record("train", 4, i, grad_share={"aggregator": 0.0}) for i in (0, 1)]
    )
    write_points(run.id, [("role/aggregator/grad_norm", 4, 5.0)])
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'data-step="4"' not in page
    assert "no recorded episode carried aggregator's gradient" in page
