"""Who gets into the API: bearer tokens, sessions with CSRF, and JSON errors for everyone else."""

import pytest
from django.test import Client

from tests.people import bearer
from webapp.experiments.models import ApiToken

pytestmark = pytest.mark.django_db


def test_an_outsider_gets_401_as_json_with_a_bearer_challenge(client, run):
    response = client.get(f"/api/v1/runs/{run.id}")

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Bearer" in response.json()["error"]


def test_a_valid_token_lets_the_teammate_read(client, run, bob):
    response = client.get(f"/api/v1/runs/{run.id}", headers=bearer(bob))

    assert response.status_code == 200
    assert response.json()["id"] == run.id


def test_an_unknown_token_gets_401(client, run):
    response = client.get(f"/api/v1/runs/{run.id}", headers={"Authorization": "Bearer trp_nope"})

    assert response.status_code == 401
    assert "not valid" in response.json()["error"]


def test_a_malformed_authorization_header_gets_401(client, run):
    response = client.get(f"/api/v1/runs/{run.id}", headers={"Authorization": "Token abc"})

    assert response.status_code == 401
    assert "Bearer <token>" in response.json()["error"]


def test_a_revoked_token_stops_working(client, run, alice):
    headers = bearer(alice)
    assert client.get(f"/api/v1/runs/{run.id}", headers=headers).status_code == 200

    ApiToken.objects.filter(user=alice).delete()

    assert client.get(f"/api/v1/runs/{run.id}", headers=headers).status_code == 401


def test_the_token_of_a_deactivated_user_gets_401(client, run, bob):
    headers = bearer(bob)
    bob.is_active = False
    bob.save(update_fields=["is_active"])

    assert client.get(f"/api/v1/runs/{run.id}", headers=headers).status_code == 401


def test_tokens_are_stored_hashed_and_record_their_use(client, run, alice):
    token, raw = ApiToken.issue(alice, "laptop")

    client.get(f"/api/v1/runs/{run.id}", headers={"Authorization": f"Bearer {raw}"})

    token.refresh_from_db()
    assert raw not in token.digest and len(token.digest) == 64
    assert raw.startswith(token.prefix)
    assert token.last_used is not None


def test_a_session_may_read_without_csrf(client, run, bob):
    client.force_login(bob)

    assert client.get(f"/api/v1/runs/{run.id}").status_code == 200


def test_a_session_must_pass_the_csrf_check_to_change_things(run, alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    response = browser.post(f"/api/v1/runs/{run.id}/cancel", content_type="application/json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]


def test_a_session_with_the_csrf_token_may_change_things(run, alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    browser.get("/experiments/")  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value

    response = browser.post(
        f"/api/v1/runs/{run.id}/cancel",
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )

    assert response.status_code == 200


def test_a_bearer_token_needs_no_csrf_token(run, alice):
    browser = Client(enforce_csrf_checks=True)

    response = browser.post(
        f"/api/v1/runs/{run.id}/cancel", content_type="application/json", headers=bearer(alice)
    )

    assert response.status_code == 200


def test_a_wrong_method_gets_405_with_allow(client, run, alice):
    response = client.put(f"/api/v1/runs/{run.id}/cancel", headers=bearer(alice))

    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert "PUT" in response.json()["error"]


def test_an_unknown_endpoint_gets_a_json_404(client, alice):
    response = client.get("/api/v1/nothing/here", headers=bearer(alice))

    assert response.status_code == 404
    assert response.json() == {"error": "There is no API endpoint /api/v1/nothing/here."}


def test_a_trailing_slash_is_optional(client, run, alice):
    assert client.get(f"/api/v1/runs/{run.id}/", headers=bearer(alice)).status_code == 200
