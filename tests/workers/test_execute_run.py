"""Runs trained by a real worker process against the real database and broker: queued from the
form, to succeeded with every metric stored; cancelled mid-run and resumed; a failure recorded
with its error; a worker killed mid-run, its run resumed from its checkpoint by another worker;
the database going away mid-run with nothing lost."""

import shutil

import pytest
from django.conf import settings

from tests.helpers import database_url, service_env, start_worker
from tests.runs import (
    FAST_SWEEP,
    SMALL,
    database_outage,
    form_data,
    points_of,
    require_postgres,
    run_in,
    steps_of,
    wait_for,
)
from webapp.experiments.models import Run, RunLog
from webapp.runs.queueing import create_experiment

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


@pytest.fixture
def worker_env(tiny_model) -> dict[str, str]:
    """The environment of a worker wired to this test session (as the celery_worker fixture),
    sweeping for dead colleagues every second."""
    return service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        **FAST_SWEEP,
    )


def queue(owner, **config) -> Run:
    experiment = create_experiment(owner, "worker test", preset="cpu-demo", config=config)
    return experiment.runs.get()


def log_lines(run: Run) -> list[str]:
    return list(RunLog.objects.filter(run=run).values_list("line", flat=True))


def assert_complete(run: Run, steps: int, eval_every: int) -> None:
    """Every training step's and every evaluation's points stored, each exactly once."""
    counts = points_of(run.id)
    assert set(counts.values()) == {1}
    assert steps_of(run.id, "train/reward") == list(range(1, steps + 1))
    evals = sorted({0, steps, *range(eval_every, steps + 1, eval_every)})
    assert steps_of(run.id, "eval/accuracy") == evals


def test_a_run_queued_from_the_form_trains_to_succeeded_with_its_metrics_stored(
    client, alice, worker_env
):
    client.force_login(alice)
    small = {name: str(value) for name, value in SMALL.items()}
    data = form_data(name="form to worker", workflow=["single"], seeds="0", **small)
    with start_worker(worker_env):
        assert client.post("/experiments/new/", data).status_code == 302
        run = Run.objects.get(experiment__name="form to worker")
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the run to finish")

    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert (done.step, done.total_steps, done.attempts, done.checkpoint_step) == (4, 4, 1, 4)
    assert done.started and done.finished and done.heartbeat and done.worker
    assert done.checkpoint_dir == str(settings.DATA_DIR / "runs" / str(run.id))
    assert_complete(done, steps=4, eval_every=2)
    assert steps_of(run.id, "role/solver/grad_norm") == [1, 2, 3, 4]
    assert steps_of(run.id, "sys/db_seconds") == [0, 1, 2, 3, 4]
    lines = log_lines(done)
    assert lines[0].endswith("(attempt 1), starting.")
    assert any(line.startswith("step 4/4 · reward") for line in lines)
    assert lines[-1].startswith("Finished at step 4")


def test_a_failing_run_is_marked_failed_with_its_error(alice, worker_env, tmp_path):
    # A directory that passes the form's check (in the data directory's models/, with a
    # config.json) but holds no model the worker can load: a missing path would be refused
    # before it was ever queued.
    broken = settings.DATA_DIR / "models" / f"no-such-model-{tmp_path.name}"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")
    try:
        run = queue(alice, **SMALL, model=str(broken), device="cpu")
        with start_worker(worker_env):
            done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the run to finish")
    finally:
        shutil.rmtree(broken)

    assert done.status == Run.FAILED
    assert done.error_type == "ModelUnavailable"
    assert broken.name in done.error_message
    assert "Traceback (most recent call last)" in done.error_traceback
    assert log_lines(done)[-1].startswith("Failed: ModelUnavailable")


def test_cancel_takes_effect_within_a_step_and_resume_finishes_the_run(client, alice, worker_env):
    run = queue(alice, **{**SMALL, "steps": 8, "checkpoint_every": 4})
    client.force_login(alice)

    with start_worker(worker_env):
        wait_for(
            lambda: run_in(run.id, Run.RUNNING) and Run.objects.get(id=run.id).step >= 1,
            what="the first step",
        )
        client.post(f"/runs/{run.id}/cancel/")
        asked_at = Run.objects.get(id=run.id).step
        cancelled = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the cancel")

        assert cancelled.status == Run.CANCELLED
        assert cancelled.step <= asked_at + 1  # the step under way when the flag was set
        assert cancelled.checkpoint_step == cancelled.step  # it checkpointed before stopping
        assert cancelled.step < 8

        client.post(f"/runs/{run.id}/resume/")
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the resumed run")

    assert done.status == Run.SUCCEEDED and done.attempts == 2 and done.step == 8
    assert_complete(done, steps=8, eval_every=2)
    assert f"resuming from the checkpoint of step {cancelled.step}" in " ".join(log_lines(done))


def test_a_killed_workers_run_resumes_from_its_checkpoint_on_another_worker(alice, worker_env):
    run = queue(alice, **{**SMALL, "steps": 8, "checkpoint_every": 2})

    with start_worker(worker_env) as first:
        wait_for(
            lambda: (Run.objects.get(id=run.id).checkpoint_step or 0) >= 2, what="a checkpoint"
        )
        first.kill()  # SIGKILL, as the OOM killer would: nothing gets to clean up
    killed = Run.objects.get(id=run.id)
    assert killed.status == Run.RUNNING and killed.step < 8

    with start_worker(worker_env) as second:
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the resumed run")

    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.attempts == 2 and done.worker == second.name != first.name
    assert_complete(done, steps=8, eval_every=2)
    lines = " ".join(log_lines(done))
    assert "stopped answering; queued again" in lines
    assert f"resuming from the checkpoint of step {killed.checkpoint_step}" in lines


def test_the_database_going_away_during_a_run_loses_nothing(alice, worker_env):
    require_postgres()
    run = queue(alice, **{**SMALL, "steps": 12})

    with start_worker(worker_env) as worker:
        wait_for(lambda: Run.objects.get(id=run.id).step >= 2, what="step 2")
        database_outage(seconds=3)
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the run to finish")
        log = worker.log.read_text()

    # The outage cut the worker's connections mid-run: it kept its points and went on.
    assert "database unreachable, keeping" in log
    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.attempts == 1
    assert_complete(done, steps=12, eval_every=2)
