"""API tokens end with the password: changing it (the password form, the admin, `manage.py
changepassword`, `set_password`) or disabling it revokes every token of that user; saving the
user otherwise, or Django re-hashing the same password on login, keeps them."""

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.people import bearer
from webapp.experiments.models import ApiToken

pytestmark = pytest.mark.django_db

OLD, NEW = "correct horse battery", "staple tiger violin"


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create_user("dana", password=OLD)


def reads(client, headers) -> int:
    return client.get("/api/v1/runs?experiment=1", headers=headers).status_code


def test_changing_the_password_on_the_form_revokes_the_users_tokens(client, dana, alice):
    headers, others = bearer(dana), bearer(alice)
    assert reads(client, headers) == 404  # the token works: no experiment 1
    client.force_login(dana)

    response = client.post(
        "/accounts/password_change/",
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
    )

    assert response.status_code == 302
    client.logout()
    assert reads(client, headers) == 401
    assert not ApiToken.objects.filter(user=dana).exists()
    assert reads(client, others) == 404  # someone else's token is untouched


def test_the_password_change_form_says_so(client, dana):
    client.force_login(dana)

    html = client.get("/accounts/password_change/").content.decode()

    assert "revokes your API tokens" in html


def test_set_password_anywhere_revokes_them(client, dana):
    headers = bearer(dana)

    dana.set_password(NEW)
    dana.save()

    assert reads(client, headers) == 401


def test_disabling_the_password_revokes_them(client, dana):
    headers = bearer(dana)

    dana.set_unusable_password()
    dana.save()

    assert reads(client, headers) == 401


def test_other_changes_to_the_user_keep_them(client, dana):
    headers = bearer(dana)

    dana.email = "dana@example.org"
    dana.save()
    client.login(username="dana", password=OLD)  # updates last_login
    client.logout()

    assert reads(client, headers) == 404


def test_rehashing_the_same_password_on_login_keeps_them(client, dana):
    headers = bearer(dana)
    # A hash Django upgrades on the next login: fewer iterations than its default.
    weak = PBKDF2PasswordHasher().encode(OLD, "saltsaltsalt", iterations=1000)
    type(dana).objects.filter(pk=dana.pk).update(password=weak)

    assert client.login(username="dana", password=OLD)
    client.logout()

    dana.refresh_from_db()
    assert dana.password != weak  # Django upgraded the hash …
    assert reads(client, headers) == 404  # … and the token still works
