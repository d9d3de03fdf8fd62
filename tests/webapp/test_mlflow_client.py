"""The real MLflow client (requirements-dev.txt) against a live Troupe: a script that logs to
MLflow logs into Troupe unchanged, reads back what it logged, resumes without duplicates, and
is told clearly what is wrong with bad requests."""

import math

import mlflow
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException

from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, MetricPoint, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

STEPS = 120
ROLES = ("generator", "aggregator")


def grad_norm(role: str, step: int) -> float:
    return (1 + ROLES.index(role)) * (0.5 + math.sin(step / 7) ** 2) + step / 1000


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch):
    """A live server and the environment a researcher exports, with alice's token."""
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        try:
            yield base, token
        finally:
            while mlflow.active_run():
                mlflow.end_run()


def log_training(steps: range, scale: float = 1.0) -> None:
    for step in steps:
        metrics = {f"actor/{role}/grad_norm": scale * grad_norm(role, step) for role in ROLES}
        metrics["actor/generator/pg_clipfrac"] = scale * step / 1000
        if step % 10 == 0:
            metrics["val-core/math/acc/mean_at_1"] = 0.2 + step / 1000
        mlflow.log_metrics(metrics, step=step)


def troupe_series(base: str, token: str, run_id: int, keys: list[str]) -> dict:
    response = requests.get(
        f"{base}/api/v1/runs/{run_id}/metrics",
        params={"keys": ",".join(keys), "max_points": 0},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()["series"]


def test_a_script_logging_to_mlflow_lands_in_troupe_and_reads_back_identically(troupe):
    base, token = troupe
    mlflow.set_experiment("grpo-voting")
    with mlflow.start_run(run_name="voting seed 3") as active:
        mlflow.log_params({"workflow": "voting", "sharing": "per_role", "seed": 3, "lr": 2e-5})
        mlflow.set_tags({"task": "math", "model": "Qwen/Qwen3-0.6B"})
        log_training(range(STEPS))
    run_id = active.info.run_id

    client = MlflowClient()
    for role in ROLES:
        history = client.get_metric_history(run_id, f"actor/{role}/grad_norm")
        assert [(m.step, m.value) for m in history] == [
            (step, grad_norm(role, step)) for step in range(STEPS)
        ]
        assert all(m.timestamp > 0 for m in history)
    got = client.get_run(run_id)
    assert got.info.status == "FINISHED" and got.info.end_time >= got.info.start_time
    assert got.data.params == {
        "workflow": "voting",
        "sharing": "per_role",
        "seed": "3",
        "lr": "2e-05",
    }
    assert got.data.metrics["actor/generator/grad_norm"] == grad_norm("generator", STEPS - 1)
    assert "role/generator/grad_norm" not in got.data.metrics  # aliases: Troupe's, not logged

    troupe_id = int(got.data.tags["troupe.run_id"])
    series = troupe_series(
        base,
        token,
        troupe_id,
        [
            "actor/generator/grad_norm",
            "role/generator/grad_norm",
            "role/generator/clip_frac",
            "eval/accuracy",
        ],
    )
    expected = [grad_norm("generator", step) for step in range(STEPS)]
    for key in ("actor/generator/grad_norm", "role/generator/grad_norm"):
        assert series[key] == {"steps": list(range(STEPS)), "values": expected}
    assert series["role/generator/clip_frac"]["values"][-1] == (STEPS - 1) / 1000
    assert series["eval/accuracy"]["steps"] == list(range(0, STEPS, 10))

    run = Run.objects.get(id=troupe_id)
    assert run.external and run.status == Run.SUCCEEDED and run.name == "voting seed 3"
    assert (run.workflow, run.task, run.model, run.sharing, run.seed) == (
        "voting",
        "math",
        "Qwen/Qwen3-0.6B",
        "per_role",
        3,
    )
    assert run.experiment.name == "grpo-voting" and run.step == STEPS - 1


def test_a_resumed_run_stands_at_the_steps_it_logs_again_and_mlflow_keeps_both(troupe):
    mlflow.set_experiment("resume")
    with mlflow.start_run() as active:
        log_training(range(60))
    run_id = active.info.run_id
    troupe_id = int(MlflowClient().get_run(run_id).data.tags["troupe.run_id"])
    before = MetricPoint.objects.filter(run_id=troupe_id).count()

    # The job died after step 59 and restarts from its step-50 checkpoint, with other values.
    with mlflow.start_run(run_id=run_id):
        assert Run.objects.get(id=troupe_id).status == Run.RUNNING
        log_training(range(50, 80), scale=2.0)

    # MLflow's history keeps every point: steps 50..59 twice, the first run's
    # value first (it was logged earlier).
    history = MlflowClient().get_metric_history(run_id, "actor/aggregator/grad_norm")
    assert [m.step for m in history] == sorted([*range(80), *range(50, 60)])
    at_55 = [m.value for m in history if m.step == 55]
    assert at_55 == [grad_norm("aggregator", 55), 2.0 * grad_norm("aggregator", 55)]
    assert [m.value for m in history if m.step == 45] == [grad_norm("aggregator", 45)]
    points = MetricPoint.objects.filter(run_id=troupe_id)
    # Troupe keeps one value a step, the latest. Steps 60..79 are new: 3 role keys and their
    # 3 aliases a step, and at steps 60 and 70 the validation accuracy and its alias.
    assert points.count() == before + 20 * (3 + 3) + 2 * 2
    assert points.filter(key="role/aggregator/grad_norm", step=55).get().value == at_55[-1]
    assert Run.objects.get(id=troupe_id).status == Run.SUCCEEDED


def test_bad_requests_get_mlflow_errors_and_store_nothing(troupe, bob, monkeypatch):
    mlflow.set_experiment("errors")
    with mlflow.start_run() as active:
        mlflow.log_metric("loss", 1.0, step=0)
    run_id = active.info.run_id
    client = MlflowClient()
    troupe_id = int(client.get_run(run_id).data.tags["troupe.run_id"])
    stored = MetricPoint.objects.filter(run_id=troupe_id).count()

    with pytest.raises(MlflowException) as unknown:
        client.log_batch("0" * 31 + "f", metrics=[Metric("loss", 1.0, 0, 1)])
    assert unknown.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    assert "0" * 31 + "f" in unknown.value.message

    with pytest.raises(MlflowException) as bad_key:
        client.log_batch(run_id, metrics=[Metric("loss@1", 0.5, 0, 1)])
    assert bad_key.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "loss@1" in bad_key.value.message

    _, bobs = ApiToken.issue(bob, "bob")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", bobs)
    with pytest.raises(MlflowException) as denied:
        MlflowClient().log_batch(run_id, metrics=[Metric("loss", 0.5, 0, 1)])
    assert denied.value.error_code == "PERMISSION_DENIED"
    assert MlflowClient().get_run(run_id).info.run_id == run_id  # reading is open to the team

    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
    with pytest.raises(MlflowException) as anonymous:
        MlflowClient().get_run(run_id)
    assert anonymous.value.error_code == "UNAUTHENTICATED"

    assert MetricPoint.objects.filter(run_id=troupe_id).count() == stored
