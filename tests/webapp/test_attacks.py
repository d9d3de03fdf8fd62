"""The attacks of a signed-in user, replayed against a live Troupe (gunicorn) with two ordinary
users and the real `mlflow` client (docs/security.md):

The attacker uploads, as MLflow artifacts of their own run, a checkpoint-shaped folder whose
`state.pt` is a pickle that writes a marker file when it is unpickled, and its config.json.
Then they name it as `init_from`, as a mix-and-match source, as a branch's checkpoint and to
`trainer eval`; and they ask for a delete whose stored `init_from` climbs out with `..`. The
server refuses each request; and where an older row names the artifact anyway, the worker
refuses it before anything is read. The marker never appears, the data directory stays."""

import json
import subprocess
import sys

import mlflow
import pytest
import requests
import torch
from mlflow import MlflowClient

from tests.branches import give_checkpoints
from tests.helpers import ROOT
from tests.live_server import mlflow_at_troupe
from tests.people import make_experiment
from trainer.config import make_config
from webapp.attribution.models import SwapJob
from webapp.experiments.models import ApiToken, Run
from webapp.runs.queueing import new_run
from workers import attribution as swap_worker
from workers import execute

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


class Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def attack(alice, bob, tmp_path, monkeypatch, settings):
    """A live server; alice (the attacker) has uploaded the payload through MLflow. Yields
    (base URL, alice's API headers, the artifact checkpoint folder, the marker, bob's run)."""
    data = tmp_path / "data"
    settings.DATA_DIR = data
    data.mkdir()
    marker = tmp_path / "marker"
    local = tmp_path / "upload" / "step-000001"
    local.mkdir(parents=True)
    torch.save({"step": 1, "policies": Payload(marker)}, local / "state.pt")
    (tmp_path / "upload" / "config.json").write_text(
        json.dumps(make_config("cpu-demo", workflow="voting").to_dict())
    )
    bobs = make_experiment(bob, name="Bob's").runs.get()
    give_checkpoints(bobs, data / "runs" / str(bobs.id), best=2, steps=(4,))
    with mlflow_at_troupe(alice, tmp_path, monkeypatch) as base:
        mlflow.set_experiment("innocent")
        with mlflow.start_run() as active:
            mlflow.log_artifact(str(local / "state.pt"), "checkpoints/step-000001")
            mlflow.log_artifact(str(tmp_path / "upload" / "config.json"))
        tags = MlflowClient().get_run(active.info.run_id).data.tags
        folder = data / "runs" / tags["troupe.run_id"] / "artifacts" / "checkpoints" / "step-000001"
        assert (folder / "state.pt").is_file()
        _, token = ApiToken.issue(alice, "attack")
        yield base, {"Authorization": f"Bearer {token}"}, folder, marker, bobs


def test_init_from_an_uploaded_artifact_runs_nothing(attack, alice):
    base, headers, folder, marker, _ = attack
    config = {"workflow": "voting", "init_from": str(folder)}
    body = {"name": "x", "preset": "cpu-demo", "config": config}
    response = requests.post(f"{base}/api/v1/experiments", json=body, headers=headers, timeout=60)
    assert response.status_code == 400
    assert not Run.objects.filter(experiment__name="x").exists()

    # A row that names it anyway (written before the rule): the worker refuses it unread.
    experiment = make_experiment(alice, name="old row", workflow="voting")
    run = new_run(experiment, make_config("cpu-demo", workflow="voting", init_from=str(folder)))
    run.save()
    claimed = execute.claim(run.id, "worker", "task")
    execute.train_run(claimed)
    run.refresh_from_db()
    assert run.status == Run.FAILED and "branch point" in run.error_message
    assert not marker.exists()


def test_a_mix_source_naming_an_uploaded_artifact_runs_nothing(attack, alice, settings):
    base, headers, folder, marker, _ = attack
    own = make_experiment(alice, name="Alice's", workflow="voting").runs.get()
    give_checkpoints(own, settings.DATA_DIR / "runs" / str(own.id), best=2, steps=(4,))
    for source in (str(folder), f"{own.id}:../artifacts/checkpoints/step-000001"):
        response = requests.post(
            f"{base}/api/v1/runs/{own.id}/swap-jobs",
            json={"kind": "mix", "sources": {"generator": source}},
            headers=headers,
            timeout=60,
        )
        assert response.status_code == 400
        assert str(settings.DATA_DIR) not in response.text
        assert "not a role" not in response.text
    assert not SwapJob.objects.exists()

    # A job that names it anyway: the worker takes names and references only.
    evaluation = {"key": "x", "sources": {"generator": str(folder)}, "reuse_step": None}
    plan = {"kind": "mix", "roles": ["generator"], "evaluations": [evaluation], "to_run": 1}
    job = SwapJob.objects.create(run=own, kind="mix", plan=plan)
    assert swap_worker.run_job(*swap_worker.claim(job.id, "worker"))["status"] == SwapJob.FAILED
    job.refresh_from_db()
    assert "is not a source" in job.error
    assert not marker.exists()


def test_another_users_checkpoint_is_no_mix_source(attack, alice, settings):
    base, headers, _, _, bobs = attack
    own = make_experiment(alice, name="Alice's", workflow="voting").runs.get()
    give_checkpoints(own, settings.DATA_DIR / "runs" / str(own.id), best=2, steps=(4,))
    for source in (f"{bobs.id}:best", str(settings.DATA_DIR / "runs" / str(bobs.id))):
        response = requests.post(
            f"{base}/api/v1/runs/{own.id}/swap-jobs",
            json={"kind": "mix", "sources": {"generator": source}},
            headers=headers,
            timeout=60,
        )
        assert response.status_code in (400, 403)
    assert not SwapJob.objects.exists()


def test_a_branch_naming_an_uploaded_artifact_runs_nothing(attack, alice, settings):
    base, headers, folder, marker, _ = attack
    own = make_experiment(alice, name="Alice's", workflow="voting").runs.get()
    give_checkpoints(own, settings.DATA_DIR / "runs" / str(own.id), best=2, steps=(4,))
    for checkpoint in (str(folder), "../artifacts/checkpoints/step-000001"):
        response = requests.post(
            f"{base}/api/v1/runs/{own.id}/branch",
            json={"checkpoint": checkpoint, "control": True},
            headers=headers,
            timeout=60,
        )
        assert response.status_code == 400
    assert not Run.objects.filter(parent=own).exists()
    assert not marker.exists()


def test_evaluating_an_uploaded_artifact_runs_nothing(attack):
    _, _, folder, marker, _ = attack
    done = subprocess.run(
        [sys.executable, "-m", "trainer", "eval", "--preset", "cpu-demo"]
        + ["--checkpoint", str(folder), "--problems", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    assert "not tensors or plain data" in done.stderr
    assert not marker.exists()


def test_a_delete_whose_init_from_climbs_out_keeps_the_data_directory(attack, alice, settings):
    base, headers, _, _, bobs = attack
    data = settings.DATA_DIR
    (data / "branch-points").mkdir()
    climb = f"{data}/branch-points/../x/step-000001"
    body = {"name": "climb", "preset": "cpu-demo", "config": {"init_from": climb}}
    response = requests.post(f"{base}/api/v1/experiments", json=body, headers=headers, timeout=60)
    assert response.status_code == 400

    # A row that says so anyway: deleting it removes its own folder and nothing else.
    experiment = make_experiment(alice, name="old climb")
    run = new_run(experiment, make_config("cpu-demo", init_from=climb))
    run.save()
    response = requests.delete(
        f"{base}/api/v1/experiments/{experiment.id}", headers=headers, timeout=60
    )
    assert response.status_code == 200
    assert (data / "runs" / str(bobs.id) / "checkpoints").is_dir()
    assert requests.get(f"{base}/api/v1/experiments", headers=headers, timeout=60).ok
