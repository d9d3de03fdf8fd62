"""One probe problem in several runs (`/episodes/compare/?runs=a,b`): side by side at the
latest evaluation they all recorded, or at the step asked; bad parameters are a 400."""

import re

import pytest

from tests.people import make_experiment
from tests.webapp.episode_records import get, probe
from webapp.episodes import store

pytestmark = pytest.mark.django_db


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


@pytest.mark.parametrize(
    "query, name",
    [
        ("runs=1;2", "runs"),
        ("runs=1,2,3,4,5", "runs"),
        ("runs={run}&step=x", "step"),
        ("runs={run}&problem=" + "p" * 201, "problem"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client, run, bob, query, name):
    html = get(client, bob, "/episodes/compare/?" + query.format(run=run.id), status=400)
    assert f'data-bad-query="{name}"' in html


def test_a_run_nobody_can_see_is_a_404_and_a_stranger_signs_in_first(client, run, bob):
    get(client, bob, f"/episodes/compare/?runs={run.id},{run.id + 99}", status=404)
    client.logout()
    response = client.get(f"/episodes/compare/?runs={run.id}")
    assert response.status_code == 302 and "/login/" in response["Location"]
