"""No page or API answer shows a user where the server keeps its data (docs/security.md).

A run branched from a checkpoint, a new experiment started from `RUN:NAME`, an attribution
that cannot be planned, a swap job and a run log line whose worker met a path: the owner and
a teammate read every page and API answer that shows them, and none holds the data
directory's absolute path. A run stored before (its `init_from` the absolute path of its
branch point) is rewritten by the migration, and the worker still starts it from that folder.
"""

import importlib
from pathlib import Path

import pytest
from django.conf import settings

import workers.attribution
from tests.branches import give_checkpoints
from tests.people import bearer, make_experiment
from webapp.attribution.models import SwapJob
from webapp.experiments.models import Experiment, Run, RunLog
from webapp.runs.run_files import delete_runs
from workers.attribution import claim, run_job
from workers.branch_points import check_init_from
from workers.execute import claim as claim_run
from workers.reporter import DatabaseReporter

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


def on_disk(owner, data: Path, **checkpoints) -> Run:
    run = make_experiment(owner, workflow="voting", sharing="per_role").runs.get()
    return give_checkpoints(run, data / "runs" / str(run.id), **checkpoints)


def failed_swap_job(run: Run, data: Path, monkeypatch) -> SwapJob:
    """A mix-and-match job whose worker met a file it could not read."""
    plan = {"roles": ["generator", "aggregator"], "evaluations": []}
    job = SwapJob.objects.create(run=run, kind="mix", plan=plan)
    state = data / "runs" / str(run.id) / "checkpoints" / "step-000004" / "state.pt"

    def unreadable(job, lease):
        raise FileNotFoundError(f"{state} holds objects that are not tensors")

    monkeypatch.setattr(workers.attribution, "_evaluate", unreadable)
    assert run_job(*claim(job.id, "w@node"))["status"] == SwapJob.FAILED
    return job


def a_log_line_with_a_path(run: Run, data: Path) -> None:
    held = claim_run(run.id, worker="cpu@here", task_id="t")
    reporter = DatabaseReporter(held.id, held.attempts, flush_seconds=3600)
    reporter.line(f"rollouts logged to {data / 'runs' / str(run.id) / 'vllm.log'}")
    reporter.on_status(f"Loading model {data / 'models' / 'tiny-s'}")
    assert reporter.flush()


@pytest.fixture
def planted(client, alice, data_dir, monkeypatch):
    parent = on_disk(alice, data_dir)
    body = {"checkpoint": "best", "branches": [{"lr_factor": 0.5}]}
    answer = client.post(
        f"/api/v1/runs/{parent.id}/branch", body, "application/json", headers=bearer(alice)
    )
    assert answer.status_code == 201, answer.json()
    child = Run.objects.filter(parent=parent).last()
    spec = {"name": "from a reference", "preset": "cpu-demo"}
    spec["config"] = {"workflow": "voting", "sharing": "per_role", "init_from": f"{parent.id}:best"}
    answer = client.post("/api/v1/experiments", spec, "application/json", headers=bearer(alice))
    assert answer.status_code == 201, answer.json()
    started = Experiment.objects.get(id=answer.json()["id"])
    bare = on_disk(alice, data_dir, best=None, steps=())  # no checkpoint: nothing to attribute
    failed_swap_job(parent, data_dir, monkeypatch)
    a_log_line_with_a_path(child, data_dir)
    return parent, child, started, bare


def addresses(parent, child, started, bare) -> list[str]:
    runs = [parent.id, child.id, bare.id, started.runs.get().id]
    experiments = [parent.experiment_id, started.id]
    job = SwapJob.objects.get(run=parent)
    pages = ["/", "/accounts/", "/experiments/", "/alerts/", "/dash/"]
    pages += [f"/runs/{r}/" for r in runs] + [f"/runs/{r}/live.json" for r in runs]
    pages += [f"/experiments/{e}/" for e in experiments]
    pages += [f"/runs/new/?run={child.id}", f"/experiments/new/?experiment={started.id}"]
    pages += [f"/runs/new/?run={r}" for r in runs]
    pages += [f"/runs/{parent.id}/branch/", f"/runs/{bare.id}/mix/", f"/runs/{bare.id}/attribute/"]
    pages += ["/explore/runs.csv?cols=params.init_from", "/explore/runs.json?cols=params.init_from"]
    pages += ["/explore/?cols=params.init_from", f"/episodes/compare/?runs={child.id},{parent.id}"]
    api = [f"/api/v1/runs/{r}" for r in runs] + [f"/api/v1/experiments/{e}" for e in experiments]
    api += ["/api/v1/runs", "/api/v1/experiments", f"/api/v1/swap-jobs/{job.id}"]
    api += [f"/api/v1/runs/{r}/attribution-plan?kind=gain" for r in runs]
    api += [f"/api/v1/runs/{parent.id}/swap-jobs"]
    api += [f"/api/2.0/mlflow/runs/get?run_id={r}" for r in runs]
    api += [f"/api/2.0/mlflow/artifacts/list?run_id={r}" for r in runs]
    return pages + api


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_no_answer_shows_the_data_directory(client, planted, who, request):
    user = request.getfixturevalue(who)
    client.force_login(user)
    data = str(settings.DATA_DIR)
    parent, child, started, bare = planted
    shown = {}
    for address in addresses(*planted):
        response = client.get(address, headers=bearer(user) if "/api/" in address else {})
        assert response.status_code < 500, address
        shown[address] = response.content.decode()
    # what a user sends back: an attribution that cannot be planned, a mix from a bare run
    for address, body in (
        (f"/runs/{bare.id}/attribute/", {"kind": "gain"}),
        (f"/runs/{bare.id}/mix/", {"generator": "latest", "aggregator": "base"}),
    ):
        response = client.post(address, body, follow=True)
        shown[f"POST {address}"] = response.content.decode()
    answer = client.post(
        f"/api/v1/runs/{bare.id}/swap-jobs",
        {"kind": "gain"},
        "application/json",
        headers=bearer(user),
    )
    shown["POST swap-jobs"] = answer.content.decode()
    assert "no step checkpoint" in shown["POST swap-jobs"] or answer.status_code == 403
    leaks = sorted(address for address, text in shown.items() if data in text)
    assert leaks == []
    for address in (f"/api/v1/runs/{child.id}", f"/api/2.0/mlflow/runs/get?run_id={child.id}"):
        assert "branch-points/run-" in shown[address]  # the start, as named
    job = SwapJob.objects.get(run=parent)
    assert "$TROUPE_DATA_DIR/runs/" in job.error and data not in job.error
    assert RunLog.objects.filter(run=child, line__contains="$TROUPE_DATA_DIR/runs/").exists()
    assert Run.objects.get(id=child.id).phase == "Loading model $TROUPE_DATA_DIR/models/tiny-s"


def test_a_branched_runs_start_is_stored_relative_to_the_data_directory(
    planted, data_dir, monkeypatch
):
    parent, child, started, _ = planted
    for run in (child, started.runs.get()):
        start = run.config["init_from"]
        assert start.startswith("branch-points/run-") and not Path(start).is_absolute()
        assert Path(check_init_from(start)) == data_dir / start  # the worker's folder
        assert (data_dir / start / "state.pt").read_bytes() == b"best state of step 2"
    # the branch point goes with the last run that starts from it
    point = (data_dir / child.config["init_from"]).parent.parent
    monkeypatch.setattr("django.db.transaction.on_commit", lambda do: do())
    delete_runs(Run.objects.filter(id=child.id))
    assert point.is_dir()  # its sibling (the control) still starts from it
    delete_runs(Run.objects.filter(parent=parent))
    assert not point.exists()
    assert (data_dir / started.runs.get().config["init_from"]).is_dir()  # another's stays


def test_rows_stored_before_are_rewritten_and_still_start(planted, data_dir):
    _, child, started, _ = planted
    relative = child.config["init_from"]
    absolute = str(data_dir / relative)
    Run.objects.filter(id=child.id).update(config={**child.config, "init_from": absolute})
    Experiment.objects.filter(id=started.id).update(
        base_config={**started.base_config, "init_from": str(data_dir / "runs" / "1" / "x")}
    )
    assert check_init_from(absolute) == absolute  # a row from before starts as it did

    from django.apps import apps

    older = f"FileNotFoundError: {data_dir / 'runs' / '9' / 'checkpoints'}"
    SwapJob.objects.create(run=child, kind="mix", plan={}, error=older)
    RunLog.objects.create(run=child, line=older)
    Run.objects.filter(id=child.id).update(error_message=older, error_traceback=older)

    name = "webapp.experiments.migrations.0011_init_from_relative_to_data_dir"
    importlib.import_module(name).rewrite(apps, None)
    importlib.import_module(name).tidy_texts(apps, None)

    child.refresh_from_db()
    started.refresh_from_db()
    assert child.config["init_from"] == relative
    assert check_init_from(child.config["init_from"]) == absolute  # the same folder, same hash
    assert started.base_config["init_from"] == "runs/1/x"
    tidied = "FileNotFoundError: $TROUPE_DATA_DIR/runs/9/checkpoints"
    assert SwapJob.objects.get(run=child).error == tidied
    assert RunLog.objects.filter(run=child, line=tidied).exists()
    assert (child.error_message, child.error_traceback) == (tidied, tidied)
