"""The people of the experiment, run and API tests, and small factories for their data.

- alice, the owner of the experiments the tests make;
- bob, a teammate: signed in, so he may read everything, but he may not change alice's work;
- carol, staff: she may change anyone's work;
- an outsider is anyone not signed in (the plain `client` fixture) or holding no valid token.

The conftest.py of each test folder that needs them imports the fixtures.
"""

import pytest

from trainer.config import make_config
from webapp.experiments.models import ApiToken, Experiment, Run
from webapp.runs.queueing import new_run

# No passwords: hashing one takes most of a second (Django's PBKDF2 default), and the tests
# sign in with force_login or tokens. The browser test sets its own.


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob")


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", is_staff=True)


def make_experiment(owner, name="Voting on math", runs=1, **config) -> Experiment:
    """An experiment with `runs` queued runs (seeds 0, 1, …), stored without sending any task."""
    experiment = Experiment.objects.create(owner=owner, name=name, preset="cpu-demo")
    for seed in range(runs):
        new_run(experiment, make_config("cpu-demo", seed=seed, **config)).save()
    return experiment


@pytest.fixture
def experiment(alice) -> Experiment:
    return make_experiment(alice)


@pytest.fixture
def run(experiment) -> Run:
    return experiment.runs.get()


def bearer(user, name: str = "test") -> dict[str, str]:
    """Headers for the Django test client that authenticate with a new token of `user`."""
    _, raw = ApiToken.issue(user, name)
    return {"Authorization": f"Bearer {raw}"}
