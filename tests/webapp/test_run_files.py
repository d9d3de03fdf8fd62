"""Deleting runs removes what they left in the data directory: their run directories, and
their frozen branch points unless a remaining run still starts from one. The files stand in
for a trained run's (the layout is what counts, not the bytes)."""

import pytest

from tests.people import bearer, make_experiment
from trainer.config import make_config
from webapp.experiments.models import Run
from webapp.runs.queueing import new_run
from webapp.runs.run_files import remove_run_files

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def trained(data, run_id: int) -> None:
    (data / "runs" / str(run_id) / "checkpoints" / "step-000004").mkdir(parents=True)
    (data / "runs" / str(run_id) / "metrics.jsonl").write_text("{}\n")


def branch_point(data, run_id: int, tag: str):
    point = data / "branch-points" / f"run-{run_id}-{tag}"
    (point / "checkpoints" / "best-000001").mkdir(parents=True)
    return point


def test_deleting_an_experiment_removes_its_runs_files(
    client, alice, data, django_capture_on_commit_callbacks
):
    experiment = make_experiment(alice, runs=2)
    first, second = experiment.runs.order_by("id")
    for run in (first, second):
        trained(data, run.id)
    used, unused = branch_point(data, first.id, "aaaa"), branch_point(data, second.id, "bbbb")
    # A run elsewhere still starts from the first run's branch point; another experiment's
    # run keeps its files.
    other = make_experiment(alice, name="Elsewhere")
    child = new_run(other, make_config("cpu-demo", init_from=f"{used}/checkpoints/best-000001"))
    child.save()
    trained(data, child.id)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/v1/experiments/{experiment.id}", headers=bearer(alice))

    assert response.status_code == 200
    assert not (data / "runs" / str(first.id)).exists()
    assert not (data / "runs" / str(second.id)).exists()
    assert not unused.exists()
    assert used.exists()
    assert (data / "runs" / str(child.id) / "metrics.jsonl").exists()

    # The last run that starts from it takes it along.
    with django_capture_on_commit_callbacks(execute=True):
        client.delete(f"/api/v1/runs/{child.id}", headers=bearer(alice))

    assert not used.exists()
    assert not (data / "runs" / str(child.id)).exists()


def test_deleting_a_run_removes_only_its_own_files(
    client, alice, data, django_capture_on_commit_callbacks
):
    first, second = make_experiment(alice, runs=2).runs.order_by("id")
    for run in (first, second):
        trained(data, run.id)
    # "run-<id>-" never matches a longer id that starts with the same digits.
    lookalike = branch_point(data, int(f"{first.id}0"), "cccc")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/v1/runs/{first.id}", headers=bearer(alice))

    assert response.status_code == 200
    assert not Run.objects.filter(id=first.id).exists()
    assert not (data / "runs" / str(first.id)).exists()
    assert (data / "runs" / str(second.id) / "metrics.jsonl").exists()
    assert lookalike.exists()


def test_the_delete_button_removes_the_files_too(
    client, alice, data, django_capture_on_commit_callbacks
):
    experiment = make_experiment(alice)
    run = experiment.runs.get()
    trained(data, run.id)
    point = branch_point(data, run.id, "dddd")
    client.force_login(alice)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/experiments/{experiment.id}/delete/")

    assert response.status_code == 302
    assert not (data / "runs" / str(run.id)).exists()
    assert not point.exists()


def test_only_branch_points_are_removed_and_missing_files_are_no_error(data):
    # A run may start from any checkpoint directory: only Troupe's branch points are its own.
    elsewhere = data / "mine" / "run-7" / "checkpoints" / "step-000004"
    elsewhere.mkdir(parents=True)

    remove_run_files([12345], ["ckpt", str(elsewhere)])  # 12345 never had a directory

    assert elsewhere.exists()


# What a stored init_from may say (rows written before the server made every init_from, or by
# hand): `{data}` is the data directory, `{other}` another run's folder. None of them may take
# anything but the deleted run's own folder along.
HOSTILE_STARTS = [
    "{data}/branch-points/../x/step-000001",  # .parent.parent is the data directory itself
    "{data}/branch-points/../runs/{other}/checkpoints/step-000001",
    "{data}/branch-points/run-1-abc/checkpoints/../../../runs/{other}/checkpoints/s",
    "{data}/branch-points/run-9-abcdef12/../../runs/{other}/checkpoints/step-1",
    "{data}/branch-points/link-out/checkpoints/step-000001",  # a link to another run's folder
    "{data}/branch-points/run-5-abcdef12/checkpoints",  # the branch-points folder's child
    "/",
    "{data}",
    "{data}/runs/{other}/checkpoints/step-000001",
    "x" * 5000,
]


@pytest.mark.parametrize("start", HOSTILE_STARTS)
def test_a_delete_never_removes_more_than_the_runs_own_folder(
    client, alice, data, start, django_capture_on_commit_callbacks
):
    (data / "branch-points").mkdir(parents=True)
    mine, other = make_experiment(alice, runs=2).runs.order_by("id")
    trained(data, other.id)
    (data / "branch-points" / "link-out").symlink_to(data / "runs" / str(other.id))
    (data / "db.sqlite3").write_text("the database")
    Run.objects.filter(id=mine.id).update(
        config={**mine.config, "init_from": start.format(data=data, other=other.id)}
    )
    trained(data, mine.id)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/v1/runs/{mine.id}", headers=bearer(alice))

    assert response.status_code == 200
    assert not (data / "runs" / str(mine.id)).exists()
    assert (data / "db.sqlite3").read_text() == "the database"
    assert (data / "runs" / str(other.id) / "metrics.jsonl").exists()
    assert (data / "branch-points" / "link-out").is_symlink()


def test_a_run_folder_that_is_a_link_is_unlinked_never_followed(data):
    (data / "runs").mkdir(parents=True)
    (data / "kept").mkdir()
    (data / "kept" / "file").write_text("not the run's")
    (data / "runs" / "77").symlink_to(data / "kept")

    remove_run_files([77], ["a\0b", "y" * 5000])  # a NUL, a name too long: no error

    assert (data / "kept" / "file").exists()
