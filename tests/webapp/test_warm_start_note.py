"""The form says, before anything is queued, which tiny models a first run must warm-start
(webapp/runs/warm_start.py): tiny-m beside tiny-s once showed its multi-hour warm start only
after queueing."""

import json

import pytest

from tests.people import bearer

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def model_help(client) -> str:
    html = client.get("/experiments/new/?preset=cpu-demo").content.decode()
    start = html.find('data-help="model"')
    return html[start : html.find("</p>", start)] if start >= 0 else ""


def test_the_form_names_the_models_a_first_run_warm_starts(client, bob, fresh_data_dir):
    client.force_login(bob)

    said = model_help(client)

    assert "tiny-m about 7–14 minutes (1,200 steps)" in said and "tiny-l" in said
    assert "hours where the cores are shared" in said
    assert "tiny-s" not in said  # it ships built


def test_a_model_built_here_before_needs_no_word(client, bob, fresh_data_dir):
    built = fresh_data_dir / "models" / "tiny-m-0123456789ab"
    built.mkdir(parents=True)
    (built / "done").write_text("")
    client.force_login(bob)

    said = model_help(client)

    assert "tiny-m" not in said and "tiny-l" in said


def test_queueing_such_a_run_says_it_again(client, alice, fresh_data_dir):
    body = {"name": "m", "preset": "cpu-demo", "config": {"model": "tiny-m"}}
    response = client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(alice),
    )

    assert response.status_code == 201
    assert any("warm-starts it on its worker" in w for w in response.json()["warnings"])
