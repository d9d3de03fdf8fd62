"""API tokens on the account page (made, shown once, revoked) and `manage.py create_token`."""

import pytest
from django.core.management import CommandError, call_command

from webapp.experiments.models import ApiToken, hash_token

pytestmark = pytest.mark.django_db


def test_a_new_token_is_shown_once_and_stored_hashed(client, alice):
    client.force_login(alice)

    response = client.post("/accounts/tokens/", {"name": "laptop"}, follow=True)

    html = response.content.decode()
    token = ApiToken.objects.get(user=alice)
    raw = html.split('<code id="new-token">')[1].split("<")[0]
    assert token.name == "laptop" and token.digest == hash_token(raw)
    assert f"{token.prefix}…" in html
    assert raw not in client.get("/accounts/").content.decode()


def test_the_token_works_for_the_api(client, alice, run):
    client.force_login(alice)
    html = client.post("/accounts/tokens/", {"name": ""}, follow=True).content.decode()
    raw = html.split('<code id="new-token">')[1].split("<")[0]
    client.logout()

    response = client.get(f"/api/v1/runs/{run.id}", headers={"Authorization": f"Bearer {raw}"})

    assert response.status_code == 200


def test_the_owner_revokes_a_token(client, alice):
    token, _ = ApiToken.issue(alice, "old")
    client.force_login(alice)

    response = client.post(f"/accounts/tokens/{token.id}/revoke/", follow=True)

    assert "Token revoked" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_nobody_revokes_someone_elses_token(client, alice, carol):
    token, _ = ApiToken.issue(alice, "mine")
    client.force_login(carol)

    assert client.post(f"/accounts/tokens/{token.id}/revoke/").status_code == 404
    assert ApiToken.objects.filter(id=token.id).exists()


def test_the_account_page_lists_only_ones_own_tokens(client, alice, bob):
    ApiToken.issue(alice, "alices-token")
    ApiToken.issue(bob, "bobs-token")
    client.force_login(bob)

    html = client.get("/accounts/").content.decode()

    assert "bobs-token" in html and "alices-token" not in html


def test_an_outsider_makes_no_token(client):
    response = client.post("/accounts/tokens/", {"name": "x"})

    assert response.status_code == 302 and not ApiToken.objects.exists()


def test_create_token_prints_a_token_for_the_user(alice, capsys):
    call_command("create_token", "alice")

    raw = capsys.readouterr().out.strip()
    assert raw.startswith("trp_")
    assert ApiToken.objects.get(digest=hash_token(raw)).user == alice


def test_create_token_names_an_unknown_user(db):
    with pytest.raises(CommandError, match="There is no user 'nobody'"):
        call_command("create_token", "nobody")
