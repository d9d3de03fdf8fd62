"""Sign-in throttling through real requests to the login page (and the admin's): too many
wrong passwords for one account, or from one address, and attempts are refused with 429 and
Retry-After — even with the right password — without hashing it; other users, other
addresses and bearer-token API calls go on as before."""

from datetime import timedelta

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.utils import timezone

from tests.people import bearer
from webapp.accounts.models import LoginFailures

pytestmark = pytest.mark.django_db

RIGHT = "correct horse battery"


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    """MD5 instead of PBKDF2 (most of a second a hash): the counting is what is tested."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.TROUPE_LOGIN_MAX_FAILURES = 5
    settings.TROUPE_LOGIN_ADDRESS_MAX_FAILURES = 20
    settings.TROUPE_LOGIN_WINDOW_SECONDS = 900


@pytest.fixture
def erin(django_user_model):
    return django_user_model.objects.create_user("erin", password=RIGHT)


@pytest.fixture
def frank(django_user_model):
    return django_user_model.objects.create_user("frank", password=RIGHT)


def sign_in(client, username, password, address="10.0.0.1", path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(client) -> bool:
    return client.get("/accounts/").status_code == 200


def test_the_right_password_after_forty_wrong_ones_is_refused(client, erin):
    statuses = [sign_in(client, "erin", f"guess {i}").status_code for i in range(40)]

    response = sign_in(client, "erin", RIGHT)

    assert statuses[:5] == [200] * 5 and set(statuses[5:]) == {429}
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 900
    assert "Too many failed sign-ins" in response.content.decode()
    assert "Try again in 15 minutes" in response.content.decode()
    assert not signed_in(client)


def test_the_lock_is_per_account_other_users_sign_in(client, erin, frank):
    for i in range(6):
        sign_in(client, "erin", f"guess {i}", address="10.0.0.1")

    assert sign_in(client, "frank", RIGHT, address="10.0.0.2").status_code == 302
    assert sign_in(client, "erin", RIGHT, address="10.0.0.3").status_code == 429


def test_the_account_lock_ends_with_its_window(client, erin):
    for i in range(5):
        sign_in(client, "erin", f"guess {i}")
    assert sign_in(client, "erin", RIGHT).status_code == 429

    LoginFailures.objects.update(since=timezone.now() - timedelta(seconds=901))

    assert sign_in(client, "erin", RIGHT).status_code == 302
    assert signed_in(client)


def test_a_success_clears_the_accounts_count(client, erin):
    for _ in range(3):
        for i in range(4):
            assert sign_in(client, "erin", f"guess {i}").status_code == 200
        assert sign_in(client, "erin", RIGHT).status_code == 302
        client.logout()


def test_an_address_guessing_at_many_accounts_is_refused_for_all(client, frank):
    for i in range(20):
        assert sign_in(client, f"user{i}", "guess", address="10.0.0.9").status_code == 200

    assert sign_in(client, "frank", RIGHT, address="10.0.0.9").status_code == 429
    assert sign_in(client, "frank", RIGHT, address="10.0.0.10").status_code == 302


def test_usernames_differing_in_case_share_a_count(client, erin):
    for name in ("erin", "Erin", "ERIN", "eRin", "erIN"):
        sign_in(client, name, "guess")

    assert sign_in(client, "erin", RIGHT).status_code == 429


def test_refused_attempts_hash_no_password(client, erin, monkeypatch):
    for i in range(5):
        sign_in(client, "erin", f"guess {i}")
    hashed = []
    original = MD5PasswordHasher.encode
    monkeypatch.setattr(
        MD5PasswordHasher,
        "encode",
        lambda self, *a, **k: hashed.append(1) or original(self, *a, **k),
    )

    for i in range(10):
        assert sign_in(client, "erin", f"more {i}").status_code == 429
    assert hashed == []

    sign_in(client, "nobody", "guess", address="10.0.0.5")  # not throttled: hashed as usual
    assert hashed == [1]


def test_the_admin_login_is_throttled_too(client, django_user_model):
    django_user_model.objects.create_user("root", password=RIGHT, is_staff=True)
    for i in range(5):
        sign_in(client, "root", f"guess {i}", path="/admin/login/")

    sign_in(client, "root", RIGHT, path="/admin/login/")

    assert not client.get("/admin/").status_code == 200


def test_bearer_token_calls_from_a_refused_address_still_work(client, erin, run):
    headers = bearer(erin)
    for i in range(20):
        sign_in(client, f"user{i}", "guess", address="10.0.0.7")
    assert sign_in(client, "erin", RIGHT, address="10.0.0.7").status_code == 429

    response = client.get(f"/api/v1/runs/{run.id}", headers=headers, REMOTE_ADDR="10.0.0.7")

    assert response.status_code == 200


def test_a_counter_whose_window_passed_is_cleaned_up(client, erin):
    sign_in(client, "erin", "guess")
    LoginFailures.objects.update(since=timezone.now() - timedelta(days=1))

    sign_in(client, "other", "guess", address="10.0.0.8")

    assert LoginFailures.objects.count() == 2  # the new account and address, not the old ones
