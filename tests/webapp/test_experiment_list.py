"""The experiments list: names, owners, counts by status and progress, for anyone signed in."""

import pytest

from tests.people import make_experiment
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db


def test_an_outsider_is_sent_to_sign_in(client):
    response = client.get("/experiments/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/experiments/"


def test_the_teammate_sees_every_experiment_with_counts_and_progress(client, alice, bob):
    experiment = make_experiment(alice, name="Shared vs isolated", runs=4)
    runs = list(experiment.runs.order_by("id"))
    Run.objects.filter(id=runs[0].id).update(status=Run.SUCCEEDED, step=30)
    Run.objects.filter(id=runs[1].id).update(status=Run.RUNNING, step=15)
    Run.objects.filter(id=runs[2].id).update(status=Run.FAILED, step=3)
    client.force_login(bob)

    html = client.get("/experiments/").content.decode()

    assert "Shared vs isolated" in html and ">alice<" in html
    for label in ("1 running", "1 queued", "1 succeeded", "1 failed"):
        assert label in html
    # succeeded counts as done (30), running as 15 of 30, failed as the 3 steps it trained,
    # queued as 0: 48 / 120
    assert "40%" in html


def test_an_empty_list_invites_a_first_experiment(client, bob):
    client.force_login(bob)

    html = client.get("/experiments/").content.decode()

    assert "No experiments yet" in html and 'href="/experiments/new/?preset=cpu-demo"' in html


def test_the_nav_leads_to_the_list(client, bob):
    client.force_login(bob)

    assert 'href="/experiments/"' in client.get("/").content.decode()


def test_a_run_cancelled_while_queued_adds_no_progress(client, alice, bob):
    experiment = make_experiment(alice, name="Half cancelled", runs=2)
    first = experiment.runs.order_by("id").first()
    Run.objects.filter(id=first.id).update(status=Run.CANCELLED, step=0)
    client.force_login(bob)

    html = client.get("/experiments/").content.decode()

    assert 'style="width: 0%"' in html and ">0%<" in html


def test_a_new_experiment_was_made_just_now(client, alice):
    make_experiment(alice, "fresh")
    client.force_login(alice)
    page = client.get("/experiments/").content.decode()
    assert "just now" in page and "0\xa0minutes ago" not in page
