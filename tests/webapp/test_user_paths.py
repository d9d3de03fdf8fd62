"""A config from a signed-in user names a local model or a .jsonl dataset only inside the
data directory's `models/` and `datasets/` (trainer/user_paths.py): the API refuses any other
path, by real path, with one answer whether it exists or not, and stores nothing; a worker
refuses an older row that names one before it reads anything."""

import json

import pytest

from tests.people import bearer
from trainer.config import make_config
from webapp.experiments.models import Experiment
from workers.execute import start_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    for folder in ("models", "datasets", "runs/7/artifacts"):
        (settings.DATA_DIR / folder).mkdir(parents=True)
    upload = settings.DATA_DIR / "runs/7/artifacts/d.jsonl"  # what an MLflow client uploaded
    upload.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    (settings.DATA_DIR / "datasets" / "mine.jsonl").write_text(upload.read_text())
    (settings.DATA_DIR / "datasets" / "link.jsonl").symlink_to(upload)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_text("{}")
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "config.json").write_text("not JSON")
    return settings.DATA_DIR


def queue(client, alice, **config):
    body = {"name": "paths", "preset": "cpu-demo", "config": {"steps": 2, **config}}
    return client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(alice),
    )


@pytest.mark.parametrize(
    "dataset",
    [
        "{data}/runs/7/artifacts/d.jsonl",  # an upload
        "{data}/datasets/../runs/7/artifacts/d.jsonl",  # climbing out
        "{data}/datasets/link.jsonl",  # a link out
        "{data}/../secret.jsonl",  # above the data directory, not even there
        "~/notes.jsonl",
    ],
)
def test_a_dataset_outside_the_dataset_folder_is_refused(client, alice, data, dataset):
    response = queue(client, alice, dataset=dataset.format(data=data))

    assert response.status_code == 400, response.content
    assert "is not in the server's dataset folder" in response.json()["fields"]["config.dataset"]
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "model", ["{tmp}/elsewhere", "{tmp}/garbled", "{tmp}/nowhere", "{data}/models/../runs/7"]
)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_model_outside_the_model_folder_gets_one_answer(client, alice, data, model, device):
    """Refused before anything reads it: on a GPU the memory estimate reads a model's
    config.json, and a garbled one outside once gave a server error."""
    response = queue(client, alice, model=model.format(tmp=data.parent, data=data), device=device)

    assert response.status_code == 400, response.content
    assert "is not in the server's model folder" in response.json()["fields"]["config.model"]


def test_a_dataset_in_the_dataset_folder_is_queued(client, alice, data):
    response = queue(client, alice, dataset=str(data / "datasets" / "mine.jsonl"))

    assert response.status_code == 201, response.content


def test_a_worker_refuses_an_older_row_naming_an_upload(data):
    stored = make_config("cpu-demo", dataset=str(data / "runs/7/artifacts/d.jsonl")).to_dict()

    with pytest.raises(ValueError, match="is not in the server's dataset folder"):
        start_config(stored)
    fine = make_config("cpu-demo", dataset=str(data / "datasets" / "mine.jsonl")).to_dict()
    assert start_config(fine).dataset == str(data / "datasets" / "mine.jsonl")
