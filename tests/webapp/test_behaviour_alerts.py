"""The radar's behaviour rules through the whole write path: behaviour points sent through the
API queue an evaluation, whose events are kept and shown where the radar's alerts are shown
(the run page's Radar panel, the experiment page's column, /alerts/)."""

import pytest

from tests.people import make_experiment
from tests.webapp.test_alerts import rows, send

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_batch(radar_inline):
    """Judge each batch before the request returns (as tests/webapp/test_alerts.py does)."""


def points(key, values, start=1):
    return [{"key": key, "step": start + i, "value": v} for i, v in enumerate(values)]


def test_behaviour_series_raise_their_alerts_and_the_pages_show_them(client, alice, bob):
    experiment = make_experiment(alice, runs=1)
    run = experiment.runs.get()
    # Accept-wrong above 0.9 at steps 3, 4, 5: the event at 3. Agreement: reference median
    # 0.5 (steps 1–5), at 1 from step 6 to 10: the collapse at 6, seen at 10.
    wrong = points("behav/evaluator_accept_wrong", [0.5, 0.6, 0.95, 1.0, 1.0])
    agree = points("behav/voter_agreement", [0.5] * 5 + [1.0] * 5)

    assert send(client, alice, run, wrong + agree).status_code == 200

    assert rows(run) == [
        ("evaluator_accepts_wrong", "evaluator", 3, 5, False),
        ("voter_collapse", "", 6, 10, False),
    ]
    client.force_login(bob)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'data-alert-kind="evaluator_accepts_wrong"' in page
    assert 'data-alert-kind="voter_collapse"' in page
    assert "data-radar-behaviour-legend" in page and "above 0.9" in page
    listing = client.get(f"/alerts/?run={run.id}&kind=voter_collapse").content.decode()
    assert "confirmed @10" in listing
    overview = client.get(f"/experiments/{experiment.id}/").content.decode()
    assert "evaluator accepts wrong evaluator @3" in overview


def test_agreement_that_was_high_from_the_start_raises_nothing(client, run, alice):
    send(client, alice, run, points("behav/voter_agreement", [1.0] * 12))
    assert rows(run) == []


def test_a_verdict_disagreement_raises_reward_hacking_suspected_on_the_pages(client, alice, bob):
    # The trainer's second opinion failed a passing code answer at step 3.
    experiment = make_experiment(alice, runs=1)
    run = experiment.runs.get()
    disagreements = points("sandbox/verdict_disagreements", [0.0, 0.0, 1.0, 0.0])
    assert send(client, alice, run, disagreements).status_code == 200
    assert rows(run) == [("reward_hacking_suspected", "", 3, 3, False)]
    client.force_login(bob)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'data-alert-kind="reward_hacking_suspected"' in page
    overview = client.get(f"/experiments/{experiment.id}/").content.decode()
    assert "reward hacking suspected @3" in overview
