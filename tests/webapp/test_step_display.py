"""How far a run is, in words: a run of unknown length (an imported run, an MLflow run whose
length came as a tag: `total_steps` 0) reads "step 49", never "49/0" or "step 49 of 0"; a
run that resumed from a checkpoint before the step it had reached says so while it trains
those steps again, instead of its bar going back without a word. The pages and the JSON
they poll say the same."""

import pytest

from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db


def at(run, **fields) -> Run:
    Run.objects.filter(id=run.id).update(status=Run.RUNNING, **fields)
    run.refresh_from_db()
    return run


def test_a_run_of_unknown_length_shows_its_step_without_a_total(client, run, bob):
    at(run, step=49, total_steps=0)
    client.force_login(bob)

    page = client.get(f"/runs/{run.id}/").content.decode()
    listing = client.get(f"/experiments/{run.experiment_id}/").content.decode()
    live = client.get(f"/runs/{run.id}/live.json").json()["run"]
    rows = client.get(f"/experiments/{run.experiment_id}/live.json").json()["runs"]

    assert "step 49" in page and "of 0" not in page
    assert "49/0" not in listing and ">49</span>" in listing
    assert live["step_words"] == "step 49"
    assert (rows[0]["step_words"], rows[0]["step_count"]) == ("step 49", "49")


def test_a_run_of_known_length_shows_both(run):
    at(run, step=49, total_steps=500)
    assert (run.step_words, run.step_count) == ("step 49 of 500", "49/500")


def test_a_run_that_went_back_to_an_earlier_checkpoint_says_so_until_it_catches_up(
    client, run, bob
):
    at(run, step=40, total_steps=500, rewound_from=49)
    client.force_login(bob)

    said = "resumed from an earlier checkpoint: it had reached step 49"
    assert said in client.get(f"/runs/{run.id}/").content.decode()
    assert said in client.get(f"/runs/{run.id}/live.json").json()["run"]["step_words"]
    assert said not in at(run, step=49).step_words
