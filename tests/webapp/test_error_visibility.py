"""A failed run's traceback goes to its owner and staff only; everyone signed in reads the
one-line error. The worker stores both without the paths of its disk, and a clone of a
branched run offers its start as a reference, not a folder of the server."""

import pytest
from django.conf import settings

from tests.people import bearer, make_experiment
from webapp.experiments.models import Run
from webapp.runs.views import start_reference
from workers.tidy_errors import tidy

pytestmark = pytest.mark.django_db

TRACE = 'Traceback (most recent call last):\n  File "/srv/troupe/trainer/train.py", line 9\nBoom'


@pytest.fixture
def failed(alice):
    run = make_experiment(alice).runs.get()
    Run.objects.filter(id=run.id).update(
        status=Run.FAILED, error_type="ValueError", error_message="boom", error_traceback=TRACE
    )
    return run


def test_the_api_shows_the_traceback_to_the_owner_and_staff_only(client, failed, alice, bob, carol):
    url = f"/api/v1/runs/{failed.id}"
    for user, sees in ((alice, True), (carol, True), (bob, False)):
        error = client.get(url, headers=bearer(user)).json()["error"]
        assert error["message"] == "boom"
        assert ("traceback" in error) is sees, user


def test_the_run_page_shows_the_traceback_to_the_owner_only(client, failed, alice, bob):
    client.force_login(bob)
    page = client.get(f"/runs/{failed.id}/").content.decode()
    assert "boom" in page and "train.py" not in page
    client.force_login(alice)
    assert "train.py" in client.get(f"/runs/{failed.id}/").content.decode()


def test_the_worker_stores_errors_without_its_disks_paths():
    import json

    where = str(settings.BASE_DIR / "trainer" / "train.py")
    data = str(settings.DATA_DIR / "runs" / "7" / "checkpoints")
    tidied = tidy(f'File "{where}", line 3\n{json.__file__}\nFileNotFoundError: {data}')
    assert str(settings.BASE_DIR) not in tidied and str(settings.DATA_DIR) not in tidied
    assert 'File "./trainer/train.py", line 3' in tidied
    assert "$TROUPE_DATA_DIR/runs/7/checkpoints" in tidied
    assert "<python>/json/__init__.py" in tidied


def test_a_clone_of_a_branched_run_offers_its_start_as_a_reference(alice):
    parent = make_experiment(alice, name="parent").runs.get()
    child = make_experiment(alice, name="child").runs.get()
    child.parent = parent
    child.config = {
        **child.config,
        "init_from": "/data/branch-points/run-1-ab/checkpoints/best-000004",
    }
    assert start_reference(child) == f"{parent.id}:best-000004"
    assert start_reference(parent) == ""
