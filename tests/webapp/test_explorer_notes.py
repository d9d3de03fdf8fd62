"""Tags and Markdown notes on runs and experiments from the browser: the owner and staff
change them, a teammate reads them; an MLflow run's tags are the ones `mlflow.set_tag` sets,
and the explorer's search finds both kinds. And the experiments' list to search."""

import pytest

from tests.people import make_experiment
from webapp.experiments.models import TrackedExperiment, TrackedRun
from webapp.explorer.fields import parse_column, parse_sort
from webapp.explorer.models import RunTags
from webapp.explorer.query import explore
from webapp.explorer.tags import NOTE_TAG, experiment_tags, run_tags
from webapp.tracking import store

pytestmark = pytest.mark.django_db


def _set(client, url, key, value):
    return client.post(url, {"action": "set", "key": key, "value": value})


def test_the_owner_tags_a_run_and_a_teammate_reads_it(client, alice, bob, run):
    client.force_login(alice)
    assert _set(client, f"/runs/{run.id}/notes/", "idea", "lower lr").status_code == 302
    assert run_tags(run) == {"idea": "lower lr"}
    client.force_login(bob)
    page = client.get(f"/runs/{run.id}/notes/").content.decode()
    assert "lower lr" in page and 'id="tag-form"' not in page


def test_the_run_page_shows_its_note_and_tags(client, alice, bob, run):
    client.force_login(alice)
    assert 'id="run-notes"' not in client.get(f"/runs/{run.id}/").content.decode()  # none yet
    _set(client, f"/runs/{run.id}/notes/", "idea", "lower lr")
    note = "**try** <script>alert(1)</script>"
    client.post(f"/runs/{run.id}/notes/", {"action": "note", "note": note})
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()

    card = page[page.index('id="run-notes"') :]
    assert "<strong>try</strong>" in card and "<script>alert" not in page
    assert "<b>idea</b> = lower lr" in card
    notes = client.get(f"/runs/{run.id}/notes/").content.decode()
    assert f"<h1>Run {run.id}" in notes and "Run run" not in notes


def test_a_teammate_may_not_change_tags_or_notes(client, bob, run, experiment):
    client.force_login(bob)
    assert _set(client, f"/runs/{run.id}/notes/", "x", "y").status_code == 403
    note = {"action": "note", "note": "mine now"}
    assert client.post(f"/experiments/{experiment.id}/notes/", note).status_code == 403
    assert run_tags(run) == {} and experiment_tags(experiment) == {}


def test_staff_may_change_anyones_tags(client, carol, run):
    client.force_login(carol)
    _set(client, f"/runs/{run.id}/notes/", "checked", "yes")
    client.post(f"/runs/{run.id}/notes/", {"action": "delete", "key": "checked"})
    _set(client, f"/runs/{run.id}/notes/", "kept", "1")
    assert RunTags.objects.get(run=run).tags == {"kept": "1"}


def test_a_note_is_markdown_with_raw_html_and_script_links_left_inert(client, alice, experiment):
    client.force_login(alice)
    text = "**bold** <script>alert(1)</script> [x](javascript:alert(1))"
    client.post(f"/experiments/{experiment.id}/notes/", {"action": "note", "note": text})
    assert TrackedExperiment.objects.get(experiment=experiment).tags[NOTE_TAG] == text
    page = client.get(f"/experiments/{experiment.id}/notes/").content.decode()
    assert "<strong>bold</strong>" in page
    assert "<script>alert" not in page and 'href="javascript' not in page


def test_a_bad_tag_key_is_a_message_not_a_500(client, alice, run):
    client.force_login(alice)
    response = _set(client, f"/runs/{run.id}/notes/", "", "v")
    assert response.status_code == 302 and run_tags(run) == {}
    follow = client.get(f"/runs/{run.id}/notes/").content.decode()
    assert "tag" in follow.lower()


def test_an_mlflow_runs_tags_are_the_ones_its_client_sets(client, alice, experiment):
    run = store.create_run(alice, experiment, name="m", start_time=None, tags={}, user_id="")
    store.log_batch(run, [], {}, {"from_client": "yes"})
    client.force_login(alice)
    _set(client, f"/runs/{run.id}/notes/", "from_browser", "yes")
    tags = TrackedRun.objects.get(run=run).tags
    assert tags["from_client"] == "yes" and tags["from_browser"] == "yes"
    cols = [parse_column("tags.from_browser")]
    table = explore("tags.from_browser = 'yes'", cols, parse_sort(""))
    assert [row["id"] for row in table.rows] == [run.id]


def test_the_experiment_search_filters_by_name_owner_tag_and_status(client, alice, bob):
    a = make_experiment(alice, "alpha sweep")
    b = make_experiment(bob, "beta")
    store.set_experiment_tag(b, "goal", "cliff")
    client.force_login(alice)

    def names(**params):
        page = client.get("/explore/experiments/", params).content.decode()
        return sorted((n for n in ("alpha sweep", "beta") if n in page), key=page.index)

    assert names(q="sweep") == ["alpha sweep"]
    assert names(owner="bob") == ["beta"]
    assert names(tag="goal=cliff") == ["beta"]
    assert names(status="succeeded") == []
    assert names(status="queued", sort="name") == ["alpha sweep", "beta"]
    assert names(sort="newest") == ["beta", "alpha sweep"]
    assert a.runs.count() == 1
