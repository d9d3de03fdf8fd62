"""The real MLflow client against a live Troupe, for what issue 24 found missing: concurrent
`set_experiment` calls ending in one experiment, system metrics that never move a run's
step, and artifacts that go up and come down byte for byte, for their owner only."""

import subprocess
import sys
import time

import mlflow
import pytest
from mlflow import MlflowClient

from tests.helpers import ROOT, service_env
from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Experiment, MetricPoint, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# Each process imports MLflow, says it is ready, then for every name it reads calls
# set_experiment at once with the others and prints the experiment it got.
RACER = """
import sys, mlflow
print("ready", flush=True)
for line in sys.stdin:
    print(mlflow.set_experiment(line.strip()).experiment_id, flush=True)
"""


@pytest.fixture
def troupe(alice, tmp_path, monkeypatch):
    _, token = ApiToken.issue(alice, "mlflow")
    with live_troupe(tmp_path, threads=8) as base:
        for name, value in mlflow_env(base, token).items():
            monkeypatch.setenv(name, value)
        mlflow.set_tracking_uri(base)
        try:
            yield base, token
        finally:
            while mlflow.active_run():
                mlflow.end_run()


def test_simultaneous_set_experiment_calls_end_in_one_experiment(troupe, alice):
    base, token = troupe
    env = service_env(**mlflow_env(base, token))
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )  # fmt: skip
        for _ in range(4)
    ]
    try:
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready"
        for trial in range(6):
            name = f"race-{trial}"
            for racer in racers:  # all four get the name before any answers
                racer.stdin.write(name + "\n")
            for racer in racers:
                racer.stdin.flush()
            got = {racer.stdout.readline().strip() for racer in racers}
            assert len(got) == 1 and got != {""}, (name, got)
            assert Experiment.objects.filter(owner=alice, name=name).count() == 1
    finally:
        for racer in racers:
            racer.stdin.close()
            racer.wait(timeout=30)


def test_system_metrics_are_stored_but_never_move_the_runs_step(troupe, monkeypatch):
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "1")
    mlflow.set_experiment("system")
    with mlflow.start_run(log_system_metrics=True) as active:
        mlflow.log_params({"max_steps": 10})
        mlflow.log_metric("loss", 1.0, step=1)
        troupe_id = int(MlflowClient().get_run(active.info.run_id).data.tags["troupe.run_id"])
        deadline = time.monotonic() + 60
        system = MetricPoint.objects.filter(run_id=troupe_id, key__startswith="system/")
        while system.filter(step__gte=3).count() == 0:  # the monitor's own steps ran past 1
            assert time.monotonic() < deadline, "no system metrics arrived"
            time.sleep(0.2)
        run = Run.objects.get(id=troupe_id)
    assert run.step == 1 and run.progress == 0.1
    history = MlflowClient().get_metric_history(
        active.info.run_id, "system/cpu_utilization_percentage"
    )
    assert len(history) >= 3
