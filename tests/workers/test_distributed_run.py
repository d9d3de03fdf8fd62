"""A run with world_size 2 trained by a real worker (CPU, gloo): the pool process is rank 0 and
reports once, rank 1 is its child; a worker killed with -9 leaves no orphan rank and its run
resumes on another worker with every point stored once, and so does a run whose rank 1 is
killed, replicated (LoRA) or sharded (full fine-tuning, FSDP2); a worker advertises its GPUs
for the form's check; a worker with too few GPUs refuses the run with a message naming both
numbers."""

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.helpers import database_url, service_env, start_worker
from tests.runs import FAST_SWEEP, SMALL, points_of, run_in, steps_of, wait_for
from webapp.experiments.models import Run, RunLog, WorkerSeen
from webapp.runs.queueing import create_experiment

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

TWO = {**SMALL, "world_size": 2, "device": "cpu"}


def env_with(gpus: int) -> dict[str, str]:
    return service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        TROUPE_WORKER_GPUS=str(gpus),
        OMP_NUM_THREADS="1",
        **FAST_SWEEP,
    )


def queue(owner, **config) -> Run:
    return create_experiment(owner, "two ranks", preset="cpu-demo", config=config).runs.get()


def rank_processes(run_id: int) -> list[int]:
    """Pids of live `python -m workers.ranks` children of this run."""
    out = str(settings.DATA_DIR / "runs" / str(run_id))
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if b"workers.ranks" in cmd and out.encode() in cmd and state != "Z":
            pids.append(int(proc.name))
    return pids


def assert_complete(run: Run, steps: int) -> None:
    assert set(points_of(run.id).values()) == {1}  # every (key, step) once: rank 0 alone
    assert steps_of(run.id, "train/reward") == list(range(1, steps + 1))
    assert steps_of(run.id, "eval/accuracy") == sorted({0, *range(2, steps + 1, 2), steps})


def test_a_two_rank_run_trains_through_the_worker_and_reports_once(alice):
    run = queue(alice, **TWO)
    with start_worker(env_with(gpus=2)) as worker:
        seen = wait_for(lambda: WorkerSeen.objects.filter(name=worker.name).first(), what="it")
        assert seen.gpus == 2  # what the form's check reads (webapp/runs/worker_gpus.py)
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), timeout=600, what="the run")
        assert not rank_processes(run.id)
    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.checkpoint_step == 4
    assert_complete(done, 4)
    assert (settings.DATA_DIR / "runs" / str(run.id) / "checkpoints" / "step-000004").is_dir()


def test_a_killed_worker_leaves_no_rank_behind_and_its_run_resumes(alice):
    run = queue(alice, **{**TWO, "steps": 6, "checkpoint_every": 2})
    with start_worker(env_with(gpus=2)) as first:
        wait_for(
            lambda: (Run.objects.get(id=run.id).checkpoint_step or 0) >= 2,
            timeout=600,
            what="a checkpoint",
        )
        children = rank_processes(run.id)
        assert children, "rank 1 should be running"
        first.kill()  # SIGKILL: nothing cleans up; the kernel kills rank 1 (PDEATHSIG)
        deadline = time.monotonic() + 20
        while rank_processes(run.id) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = rank_processes(run.id)
        for pid in left:  # do not leak one into the next test, even when failing
            os.kill(pid, signal.SIGKILL)
        assert not left, f"orphan ranks {left}"

    with start_worker(env_with(gpus=2)):
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), timeout=600, what="the resume")
    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.attempts == 2
    assert_complete(done, 6)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_a_killed_rank_1_sends_the_run_back_to_the_queue_and_it_resumes(alice, finetune):
    run = queue(alice, **{**TWO, "steps": 6, "checkpoint_every": 2, "finetune": finetune})
    with start_worker(env_with(gpus=2)):
        wait_for(
            lambda: (Run.objects.get(id=run.id).checkpoint_step or 0) >= 2,
            timeout=600,
            what="a checkpoint",
        )
        (child,) = rank_processes(run.id)
        os.kill(child, signal.SIGKILL)
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), timeout=600, what="the resume")
        assert not rank_processes(run.id)
    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.attempts == 2
    assert_complete(done, 6)
    lines = " ".join(RunLog.objects.filter(run=run).values_list("line", flat=True))
    assert "rank 1 of 2 exited with status -9" in lines


def test_a_cancelled_two_rank_run_leaves_no_process(alice, client):
    run = queue(alice, **{**TWO, "steps": 8})
    client.force_login(alice)
    with start_worker(env_with(gpus=2)):
        wait_for(lambda: Run.objects.get(id=run.id).step >= 1, timeout=600, what="a step")
        client.post(f"/runs/{run.id}/cancel/")
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the cancel")
        time.sleep(1)
        assert not rank_processes(run.id)
    assert done.status == Run.CANCELLED and done.step < 8
    assert set(points_of(run.id).values()) == {1}


def test_a_worker_with_too_few_gpus_refuses_the_run_with_a_message(alice):
    run = queue(alice, **TWO)
    with start_worker(env_with(gpus=1)):
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the refusal")
    assert done.status == Run.FAILED
    assert "needs 2 GPUs (world_size 2) but this worker has 1" in done.error_message
    assert not points_of(run.id)
