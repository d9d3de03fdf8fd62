"""Signing in and out through django.contrib.auth, and who may see the home and account pages."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery")


def test_an_anonymous_visitor_is_sent_to_the_login_page(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_the_account_page_needs_a_login_too(client):
    response = client.get("/accounts/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_login_page_shows_the_form_and_the_stylesheet(client):
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="username"' in html and 'name="password"' in html
    assert 'href="/static/troupe.css"' in html


def test_the_right_password_signs_in_and_leads_home(client, alice):
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "correct horse battery"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"

    response = client.get("/")
    assert response.status_code == 200
    assert b"Experiments" in response.content


def test_a_wrong_password_is_refused(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})

    assert response.status_code == 200
    assert b"Your username and password didn't match" in response.content
    assert client.get("/").status_code == 302


def test_a_signed_in_user_sees_home_with_the_nav_and_this_instance(client, alice, carol, settings):
    client.force_login(alice)

    html = client.get("/").content.decode()

    for link in ('href="/"', 'href="/dash/"', 'href="/accounts/"', 'action="/accounts/logout/"'):
        assert link in html
    assert "Task queue" in html and str(settings.DATA_DIR) not in html  # the server's folders:
    client.force_login(carol)
    assert str(settings.DATA_DIR) in client.get("/").content.decode()  # staff only


def test_the_account_page_shows_who_is_signed_in(client, alice):
    client.force_login(alice)

    response = client.get("/accounts/")

    assert response.status_code == 200
    assert b"alice" in response.content


def test_signing_out_ends_the_session(client, alice):
    client.force_login(alice)

    response = client.post("/accounts/logout/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302
