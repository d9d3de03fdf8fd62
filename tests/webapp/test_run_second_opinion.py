"""The run page shows the second opinion's disagreement rate per role (trainer/rollout.py:
the share of a role's re-checked passing answers that the independent re-check failed)."""

import pytest

from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def test_the_run_page_shows_each_roles_newest_disagreement_rate(client, run, bob):
    write_points(
        run.id,
        [
            ("role/voter/verdict_disagreement_rate", 2, 0.5),
            ("role/voter/verdict_disagreement_rate", 5, 0.25),
            ("role/aggregator/verdict_disagreement_rate", 5, 0.0),
            ("role/voter/grad_norm", 5, 1.0),
        ],
    )
    client.force_login(bob)

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert 'aria-label="second opinion"' in html
    assert "<tr><td>voter</td><td>0.250</td><td>5</td></tr>" in html
    assert "<tr><td>aggregator</td><td>0.000</td><td>5</td></tr>" in html


def test_a_run_without_a_second_opinion_shows_no_table(client, run, bob):
    write_points(run.id, [("role/voter/grad_norm", 5, 1.0)])
    client.force_login(bob)

    assert 'aria-label="second opinion"' not in client.get(f"/runs/{run.id}/").content.decode()
