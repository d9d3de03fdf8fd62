"""A real Hugging Face `Trainer` with `report_to="mlflow"`, pointed at a live Troupe by
environment variables alone, as a researcher's own script would be: a tiny randomly-initialised
GPT-2 (built in the script, nothing downloaded) trains a few steps on the CPU, and its loss
curve lands in Troupe, under MLflow's key and Troupe's `train/loss`; with
HF_MLFLOW_LOG_ARTIFACTS=1 each checkpoint it saves becomes a logged model of the run, its files
uploaded to Troupe (this used to crash the training loop at the first save)."""

import subprocess
import sys
import textwrap

import mlflow
import pytest
import requests
from mlflow import MlflowClient

from tests.helpers import service_env
from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Experiment, Run
from webapp.tracking.artifacts import TOTAL_FILE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

STEPS = 6
SCRIPT = textwrap.dedent(
    f"""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1,
                                       n_head=2))
    data = [{{"input_ids": ids, "labels": ids}} for ids in torch.randint(0, 64, (32, 12))]
    args = TrainingArguments(
        output_dir="out", max_steps={STEPS}, per_device_train_batch_size=4, logging_steps=1,
        learning_rate=1e-3, report_to="mlflow", run_name="tiny-gpt2", save_strategy="SAVE",
        save_steps=3,
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
    )
    Trainer(model=model, args=args, train_dataset=data).train()
    """
)


def _train(owner, tmp_path, base, token, experiment, save_strategy, **env):
    """SCRIPT run as a researcher's own process, MLflow pointed at Troupe by environment
    variables alone; it must succeed. The run it made in `owner`'s `experiment`."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("SAVE", save_strategy))
    env = service_env(
        **mlflow_env(base, token),
        MLFLOW_EXPERIMENT_NAME=experiment,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        **env,
    )
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return Run.objects.get(experiment=Experiment.objects.get(owner=owner, name=experiment))


def test_a_hugging_face_trainer_logs_its_loss_into_troupe(alice, tmp_path):
    _, token = ApiToken.issue(alice, "hf")
    with live_troupe(tmp_path) as base:
        run = _train(
            alice,
            tmp_path,
            base,
            token,
            "hf-trainer",
            "no",
            MLFLOW_TAGS='{"task": "math", "workflow": "single"}',
        )
        response = requests.get(
            f"{base}/api/v1/runs/{run.id}/metrics",
            params={"keys": "loss,train/loss,grad_norm", "max_points": 0},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
    series = response.json()["series"]
    assert series["loss"]["steps"] == list(range(1, STEPS + 1))
    assert series["train/loss"] == series["loss"]
    assert all(value > 0 for value in series["loss"]["values"])
    assert series["grad_norm"]["steps"] == list(range(1, STEPS + 1))
    assert run.name == "tiny-gpt2" and run.status == Run.SUCCEEDED
    assert (run.task, run.workflow) == ("math", "single")
    assert run.total_steps == STEPS  # HF logs max_steps as a param
    assert run.config["learning_rate"] == "0.001"


def test_a_trainer_logging_its_checkpoints_finishes_and_they_are_listed(alice, tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"  # the server's too
    settings.DATA_DIR.mkdir()
    _, token = ApiToken.issue(alice, "hf")
    with live_troupe(tmp_path) as base:
        run = _train(
            alice, tmp_path, base, token, "hf-checkpoints", "steps", HF_MLFLOW_LOG_ARTIFACTS="1"
        )
        client = MlflowClient(tracking_uri=base)
        with pytest.MonkeyPatch.context() as patch:
            for name, value in mlflow_env(base, token).items():
                patch.setenv(name, value)
            mlflow.set_tracking_uri(base)  # where `mlflow-artifacts:` URIs resolve
            models = client.search_logged_models([str(run.experiment_id)])
            last = next(m for m in models if m.name == "checkpoint-6")
            listed = {
                f.path
                for f in mlflow.artifacts.list_artifacts(
                    artifact_uri=f"{last.artifact_location}/artifacts/checkpoint-6"
                )
            }
    assert run.status == Run.SUCCEEDED
    assert sorted(m.name for m in models) == ["checkpoint-3", "checkpoint-6"]
    assert {m.status for m in models} == {"READY"}
    assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= {
        path.rsplit("/", 1)[-1] for path in listed
    }
    held = (settings.DATA_DIR / "runs" / str(run.id)).iterdir()
    # Only the logged models (and the run's artifact total, bookkeeping beside them)
    assert [p.name for p in held if p.name != TOTAL_FILE] == ["models"]
