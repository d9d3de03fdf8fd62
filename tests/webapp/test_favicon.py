"""A browser asks every site for /favicon.ico when a page names no icon: the site has one."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_favicon_is_there_and_every_page_names_it(client, alice):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    client.force_login(alice)
    page = client.get("/experiments/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg"' in page
