"""`manage.py ensure_login`: the owner's login that `make run` prints."""

import io

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from webapp.accounts.management.commands.ensure_login import read_login

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def ensure_login() -> str:
    out = io.StringIO()
    call_command("ensure_login", stdout=out)
    return out.getvalue()


def test_it_creates_an_administrator_with_a_generated_password(data_dir):
    output = ensure_login()

    login = read_login(data_dir / "login.txt")
    assert login["username"] == "troupe"
    assert f"password: {login['password']}" in output
    user = authenticate(username="troupe", password=login["password"])
    assert user is not None and user.is_superuser
    assert (data_dir / "login.txt").stat().st_mode & 0o777 == 0o600


def test_a_second_run_prints_the_same_login_and_keeps_the_password(data_dir, django_user_model):
    first = ensure_login()
    user = django_user_model.objects.get(username="troupe")
    user.set_password("changed by the owner")
    user.save()

    assert ensure_login() == first
    assert authenticate(username="troupe", password="changed by the owner") is not None


def test_a_lost_login_file_gets_a_new_password(data_dir):
    ensure_login()
    (data_dir / "login.txt").unlink()

    ensure_login()

    login = read_login(data_dir / "login.txt")
    assert authenticate(username="troupe", password=login["password"]) is not None
