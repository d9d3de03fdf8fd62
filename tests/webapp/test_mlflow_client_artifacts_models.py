"""The real MLflow client against a live Troupe, for what it once found missing: concurrent
`set_experiment` calls (and Troupe's API racing them) ending in one experiment, system
metrics that never move a run's step, artifacts, tables and models that go up and come down
byte for byte, for their owner only, a Troupe run's best checkpoint downloadable, and NaN
batches (async too) stored whole."""

import math
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mlflow
import numpy as np
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric

from tests.helpers import ROOT, service_env
from tests.live_server import live_troupe, mlflow_env
from webapp.experiments.models import ApiToken, Experiment, MetricPoint, Run, TrackedExperiment

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
def troupe(alice, tmp_path, monkeypatch, settings):
    settings.DATA_DIR = tmp_path / "data"  # the server's too: each test's artifacts its own
    settings.DATA_DIR.mkdir()
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
        )
        for _ in range(8)  # as the issue tried: 8 processes at once
    ]
    try:
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready"
        for trial in range(4):
            name = f"race-{trial}"
            for racer in racers:  # all eight get the name before any answers
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


def test_troupes_api_and_mlflow_creating_one_name_at_once_leave_mlflow_one(troupe, alice):
    """Both paths claim the name through one unique row: whichever inserts first holds it, and
    every MLflow client then lands in that experiment (Troupe's API may still make a second,
    unclaimed, as its pages allow)."""
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
        )
        for _ in range(3)
    ]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"

    def troupe_create(name: str) -> int:
        answer = session.post(
            f"{base}/api/v1/experiments", json={"name": name, "config": {}}, timeout=60
        )
        assert answer.status_code == 201, answer.text
        return answer.json()["id"]

    try:
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready"
        with ThreadPoolExecutor(3) as pool:
            for trial in range(5):
                name = f"both-{trial}"
                for racer in racers:
                    racer.stdin.write(name + "\n")
                for racer in racers:
                    racer.stdin.flush()
                made = list(pool.map(troupe_create, [name] * 3))
                got = {racer.stdout.readline().strip() for racer in racers}
                holder = TrackedExperiment.objects.get(owner=alice, name=name).experiment_id
                assert got == {str(holder)}, (name, got, made, holder)
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


def test_artifacts_go_up_and_come_down_byte_identical(troupe, tmp_path):
    payload = bytes(range(256)) * 4096 + b"\x00tail"  # 1 MiB and a bit, every byte value
    source = tmp_path / "up"
    (source / "sub").mkdir(parents=True)
    (source / "weights.bin").write_bytes(payload)
    (source / "sub" / "notes.txt").write_text("deep\n")
    mlflow.set_experiment("artifacts")
    with mlflow.start_run() as active:
        mlflow.log_artifact(str(source / "weights.bin"))
        mlflow.log_artifacts(str(source), artifact_path="dir")
        mlflow.log_text("hello", "texts/hello.txt")
        mlflow.log_dict({"lr": 2e-5, "roles": ["a", "b"]}, "config.json")
    run_id = active.info.run_id
    client = MlflowClient()
    run = client.get_run(run_id)
    assert run.info.artifact_uri.startswith("mlflow-artifacts:/")

    assert [(f.path, f.is_dir) for f in client.list_artifacts(run_id)] == [
        ("config.json", False),
        ("dir", True),
        ("texts", True),
        ("weights.bin", False),
    ]
    listed = {f.path: f.file_size for f in client.list_artifacts(run_id, "dir")}
    assert listed == {"dir/sub": None, "dir/weights.bin": len(payload)}

    down = tmp_path / "down"
    local = client.download_artifacts(run_id, "weights.bin", str(down))
    assert open(local, "rb").read() == payload
    whole = client.download_artifacts(run_id, "dir", str(down))
    assert open(f"{whole}/sub/notes.txt").read() == "deep\n"
    assert mlflow.artifacts.load_text(f"{run.info.artifact_uri}/texts/hello.txt") == "hello"
    assert mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/config.json") == {
        "lr": 2e-5,
        "roles": ["a", "b"],
    }


def test_another_users_run_takes_no_artifacts_and_traversal_is_refused(
    troupe, alice, bob, monkeypatch
):
    base, _ = troupe
    mlflow.set_experiment("guarded")
    with mlflow.start_run() as active:
        mlflow.log_text("mine", "a.txt")
    run = MlflowClient().get_run(active.info.run_id)

    _, bobs = ApiToken.issue(bob, "bob")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", bobs)
    assert mlflow.artifacts.load_text(f"{run.info.artifact_uri}/a.txt") == "mine"  # reads: open
    with pytest.raises(requests.HTTPError) as denied:
        MlflowClient().log_text(active.info.run_id, "bob's", "a.txt")
    assert denied.value.response.json()["error_code"] == "PERMISSION_DENIED"
    assert mlflow.artifacts.load_text(f"{run.info.artifact_uri}/a.txt") == "mine"

    # The client refuses '..' itself before sending; a raw request is the server's to refuse.
    root = run.info.artifact_uri.removeprefix("mlflow-artifacts:")
    url = f"{base}/api/2.0/mlflow-artifacts/artifacts{root}/%2e%2e/%2e%2e/x.txt"
    _, alices = ApiToken.issue(
        Run.objects.get(id=int(run.data.tags["troupe.run_id"])).experiment.owner
    )
    response = requests.put(
        url, data=b"escape", headers={"Authorization": f"Bearer {alices}"}, timeout=30
    )
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "'..'" in response.json()["message"]


def test_the_client_renames_tags_deletes_and_logs_inputs(troupe):
    client = MlflowClient()
    experiment_id = client.create_experiment("draft")
    client.rename_experiment(experiment_id, "final")
    client.set_experiment_tag(experiment_id, "team", "rl")
    experiment = client.get_experiment_by_name("final")
    assert experiment.experiment_id == experiment_id and experiment.tags["team"] == "rl"

    run = client.create_run(experiment_id, tags={"note": "x"})
    client.delete_tag(run.info.run_id, "note")
    assert "note" not in client.get_run(run.info.run_id).data.tags
    mlflow.set_experiment(experiment_id=experiment_id)
    with mlflow.start_run(run_id=run.info.run_id):
        mlflow.log_input(mlflow.data.from_numpy(np.arange(6.0), name="toy"), "train")
    inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert [i.dataset.name for i in inputs] == ["toy"]
    found = client.search_runs([experiment_id], f"attributes.run_id IN ('{run.info.run_id}')")
    assert [r.info.run_id for r in found] == [run.info.run_id]

    client.delete_run(run.info.run_id)
    assert client.get_run(run.info.run_id).info.lifecycle_stage == "deleted"
    client.delete_experiment(experiment_id)
    assert client.get_experiment(experiment_id).lifecycle_stage == "deleted"


def test_each_metric_reads_back_with_the_timestamp_it_was_logged_with(troupe):
    client = MlflowClient()
    run = client.create_run(client.create_experiment("times"))
    run_id = run.info.run_id
    client.log_batch(run_id, metrics=[Metric("loss", 0.5, 1_000, 1), Metric("lr", 1e-5, 1_001, 1)])
    client.log_metric(run_id, "eval/acc", 0.25, timestamp=9_000, step=1)
    got = {
        key: [(m.step, m.timestamp) for m in client.get_metric_history(run_id, key)]
        for key in ("loss", "lr", "eval/acc")
    }
    assert got == {"loss": [(1, 1_000)], "lr": [(1, 1_001)], "eval/acc": [(1, 9_000)]}


class Echo(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input):
        return model_input


def test_a_checkpoint_logged_as_a_model_goes_up_and_comes_down(troupe, tmp_path):
    """What the Hugging Face Trainer does at each save with HF_MLFLOW_LOG_ARTIFACTS=1."""
    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    mlflow.set_experiment("hf")
    with mlflow.start_run() as active:
        info = mlflow.pyfunc.log_model(
            "checkpoint-10",
            artifacts={"model_path": str(checkpoint)},
            python_model=Echo(),
            pip_requirements=["mlflow"],
        )
    client = MlflowClient()
    model = client.get_logged_model(info.model_id)
    assert model.status == "READY" and model.source_run_id == active.info.run_id
    assert model.artifact_location.startswith("mlflow-artifacts:/")
    down = mlflow.artifacts.download_artifacts(
        f"models:/{info.model_id}", dst_path=str(tmp_path / "d")
    )
    files = {p.name for p in Path(down).rglob("*") if p.is_file()}
    assert {"MLmodel", "model.safetensors"} <= files
    found = client.search_logged_models(
        [model.experiment_id], filter_string="name = 'checkpoint-10'"
    )
    assert [m.model_id for m in found] == [info.model_id]
    listed = {f.path for f in client.list_artifacts(active.info.run_id, "checkpoint-10")}
    assert "checkpoint-10/MLmodel" in listed


def test_a_troupe_trained_runs_best_checkpoint_downloads_through_the_client(troupe, run, tmp_path):
    from webapp.metrics import write_points

    best = tmp_path / "out" / "checkpoints" / "best-000040"
    best.mkdir(parents=True)
    (best / "state.pt").write_bytes(bytes(range(256)) * 256)
    Run.objects.filter(id=run.id).update(checkpoint_dir=str(tmp_path / "out"))
    write_points(run.id, [("ckpt/best_step", 40, 40.0), ("ckpt/best_accuracy", 40, 0.75)])
    client = MlflowClient()

    assert [(f.path, f.is_dir) for f in client.list_artifacts(str(run.id))] == [
        ("troupe-best", True)
    ]
    down = Path(client.download_artifacts(str(run.id), "", str(tmp_path / "run")))
    assert (down / "troupe-best" / "state.pt").read_bytes() == (best / "state.pt").read_bytes()
    model = client.get_logged_model(f"m-{run.id:032x}")
    assert model.name == "troupe-best" and model.artifact_location.startswith("mlflow-artifacts:")
    down = mlflow.artifacts.download_artifacts(
        f"models:/{model.model_id}", dst_path=str(tmp_path / "model")
    )
    assert (Path(down) / "state.pt").read_bytes() == (best / "state.pt").read_bytes()


def test_a_nan_loss_is_kept_as_a_gap_instead_of_failing_the_job(troupe):
    mlflow.set_experiment("diverging")
    with mlflow.start_run() as active:
        mlflow.log_metrics({"loss": 0.5, "reward": 0.1}, step=0)
        mlflow.log_metrics({"loss": math.nan, "reward": 0.2}, step=1)
    history = MlflowClient().get_metric_history(active.info.run_id, "loss")
    assert [m.step for m in history] == [0, 1]
    assert history[0].value == 0.5 and math.isnan(history[1].value)
    assert MlflowClient().get_metric_history(active.info.run_id, "reward")[1].value == 0.2
    # The NaN loss (stored under Troupe's `train/loss` too) is a radar alert of the run, given
    # with the run's end.
    run = Run.objects.get(
        id=int(MlflowClient().get_run(active.info.run_id).data.tags["troupe.run_id"])
    )
    alerts = run.alerts.values_list("kind", "key", "step", "provisional")
    assert list(alerts) == [("non_finite_loss", "train/loss", 1, False)]


def test_async_logging_keeps_every_step_around_a_nan(troupe):
    mlflow.set_experiment("async")
    with mlflow.start_run() as active:
        for step in range(20):
            loss = math.nan if step == 7 else 1.0 / (step + 1)
            mlflow.log_metrics({"loss": loss, "reward": step / 20}, step=step, synchronous=False)
        mlflow.flush_async_logging()
    client = MlflowClient()
    loss = client.get_metric_history(active.info.run_id, "loss")
    assert [m.step for m in loss] == list(range(20))
    assert math.isnan(loss[7].value) and loss[8].value == 1.0 / 9
    assert len(client.get_metric_history(active.info.run_id, "reward")) == 20


def test_a_logged_table_and_dict_read_back_as_logged(troupe):
    mlflow.set_experiment("tables")
    table = {"step": [10, 20], "answer": ["42", "x + 1"], "correct": [True, False]}
    with mlflow.start_run() as active:
        mlflow.log_table(table, artifact_file="eval/answers.json")
        mlflow.log_dict({"roles": ["solver", "judge"]}, "roles.yaml")
    got = mlflow.load_table("eval/answers.json", run_ids=[active.info.run_id])
    assert got[["step", "answer", "correct"]].to_dict("list") == table
    uri = MlflowClient().get_run(active.info.run_id).info.artifact_uri
    assert mlflow.artifacts.load_dict(f"{uri}/roles.yaml") == {"roles": ["solver", "judge"]}


def test_infinities_read_back_as_logged_and_stay_gaps_to_troupe(troupe):
    mlflow.set_experiment("infinite")
    with mlflow.start_run() as active:
        mlflow.log_metrics({"loss": 0.5}, step=0)
        mlflow.log_metrics({"loss": math.inf}, step=1)
        mlflow.log_metrics({"loss": -math.inf}, step=2)
    client = MlflowClient()
    history = client.get_metric_history(active.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (1, math.inf), (2, -math.inf)]
    assert client.get_run(active.info.run_id).data.metrics["loss"] == -math.inf
    run = Run.objects.get(id=int(client.get_run(active.info.run_id).data.tags["troupe.run_id"]))
    stored = MetricPoint.objects.filter(run=run, key="loss").order_by("step")
    assert list(stored.values_list("value", flat=True)) == [0.5, None, None]  # gaps


def test_a_large_download_streams_in_one_request_even_asked_for_parts(troupe, tmp_path):
    """MLflow's client (3.18) downloads a file in parallel ranges only from a presigned URL,
    which a server offers only for a cloud store: server-info's `multipart_downloads_enabled`,
    false on MLflow's own server with a local store too. Against Troupe it streams the file in
    one GET; with MLFLOW_ENABLE_PROXY_MULTIPART_DOWNLOAD=true forced on, Troupe's 404 for the
    presigned endpoint sends it back to that one GET. The same bytes either way."""
    from mlflow.store.artifact import http_artifact_repo

    payload = np.random.default_rng(0).bytes(64 * 1024 * 1024)
    (tmp_path / "weights.bin").write_bytes(payload)
    mlflow.set_experiment("large-download")
    with mlflow.start_run() as active:
        mlflow.log_artifact(str(tmp_path / "weights.bin"))
    sent = []
    real = http_artifact_repo.http_request

    def recording(host_creds, endpoint, method, *args, **kwargs):
        sent.append((method, endpoint, kwargs.get("stream", False)))
        return real(host_creds, endpoint, method, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(http_artifact_repo, "http_request", recording)
        patch.setattr(
            http_artifact_repo.HttpArtifactRepository,
            "_multipart_download",
            lambda *a, **k: pytest.fail("a ranged download"),
        )
        got = MlflowClient().download_artifacts(
            active.info.run_id, "weights.bin", str(tmp_path / "a")
        )
        assert Path(got).read_bytes() == payload
        # A listing (is it a folder?), then the file in one streamed GET.
        assert sent == [
            ("GET", "/mlflow-artifacts/artifacts", False),
            ("GET", "/weights.bin", True),
        ]
        sent.clear()
        patch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_DOWNLOAD", "true")
        got = MlflowClient().download_artifacts(
            active.info.run_id, "weights.bin", str(tmp_path / "b")
        )
        assert Path(got).read_bytes() == payload
    presigned = [endpoint for _, endpoint, _ in sent if "/presigned/" in endpoint]
    assert len(presigned) == 1 and presigned[0].endswith("/weights.bin")  # answered 404
    assert sent[-1] == ("GET", "/weights.bin", True)
