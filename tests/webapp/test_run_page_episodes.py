"""The run page's episode panel: the latest step's episodes by default, any recorded step on
request, escaped text, long completions folded, and a bad or empty step answered with a note."""

import pytest

from tests.webapp.test_api_episodes import record
from webapp.episodes import store
from webapp.episodes.pages import FOLD_CHARS

pytestmark = pytest.mark.django_db


def page(client, user, run, query=""):
    client.force_login(user)
    response = client.get(f"/runs/{run.id}/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_a_run_without_episodes_says_so(client, run, bob):
    assert "No episodes recorded yet" in page(client, bob, run)


def test_the_latest_step_is_shown_and_any_recorded_step_on_request(client, run, bob):
    store.write_episodes(run.id, [record("train", 1, 0, completion="first step")])
    store.write_episodes(run.id, [record("eval", 2, 0, completion="probe at two")])
    latest = page(client, bob, run)
    assert "probe at two" in latest and "first step" not in latest
    chosen = page(client, bob, run, "?episodes_at=train:1")
    assert "first step" in chosen and "probe at two" not in chosen


@pytest.mark.parametrize("at", ["train:7", "nonsense", "eval:" + "9" * 50, "train:-1"])
def test_a_step_without_episodes_or_unreadable_falls_back_with_a_note(client, run, bob, at):
    store.write_episodes(run.id, [record("train", 1, 0, completion="only one")])
    html = page(client, bob, run, f"?episodes_at={at}")
    assert "only one" in html and "data-episodes-note" in html


def test_html_is_escaped_and_a_long_completion_is_folded(client, run, bob):
    long = "a" * FOLD_CHARS + "TAIL" + "b" * 100_000
    store.write_episodes(
        run.id,
        [record(completion="<script>alert('x')</script>"), record(index=1, completion=long)],
    )
    html = page(client, bob, run)
    assert "<script>alert(" not in html
    assert "&lt;script&gt;alert(" in html
    before, _, after = html.partition("TAIL")
    assert "more characters</summary>" in before[-300:]  # the tail sits behind a fold
