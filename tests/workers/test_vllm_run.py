"""A run with `rollout_engine: vllm` trained by a real worker, real vLLM on the CPU.

The run's engine is a child of the worker's pool process, in its own process group: a
finished or cancelled run stops it, a worker killed with -9 takes it along (PDEATHSIG), and
the run resumes on another worker with a new engine and every point stored once.
"""

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.helpers import database_url, service_env, start_worker
from tests.runs import FAST_SWEEP, points_of, run_in, steps_of, wait_for
from tests.trainer.vllm_helpers import engine_processes, require_vllm, tiny_m_chat_dir
from webapp.experiments.models import Run
from webapp.runs.queueing import create_experiment

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),
]


def _env() -> dict[str, str]:
    return service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        OMP_NUM_THREADS="1",
        **FAST_SWEEP,
    )


def _queue(owner, **overrides) -> Run:
    require_vllm()
    model = settings.DATA_DIR / "models" / "vllm-tiny-m"  # where a user may name a model
    if not (model / "config.json").exists():
        tiny_m_chat_dir(model)
    config = {
        "model": str(model),
        "rollout_engine": "vllm",
        "workflow": "voting",
        "sharing": "per_role",
        "steps": 4,
        "prompts_per_step": 2,
        "group_size": 2,
        "eval_problems": 2,
        "eval_samples": 1,
        "eval_every": 2,
        "checkpoint_every": 1,
        "max_new_tokens": 8,
        **overrides,
    }
    return create_experiment(owner, "vllm", preset="cpu-demo", config=config).runs.get()


def _engines(run: Run) -> list[int]:
    return engine_processes(settings.DATA_DIR / "runs" / str(run.id))


def _none_left(run: Run, seconds: float = 20) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _engines(run)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:  # never leak one into the next test, even when failing
        os.kill(pid, signal.SIGKILL)
    return left


def test_a_killed_worker_takes_its_engine_along_and_the_run_resumes(alice):
    run = _queue(alice)
    with start_worker(_env()) as first:
        wait_for(
            lambda: (Run.objects.get(id=run.id).checkpoint_step or 0) >= 1,
            timeout=600,
            what="a checkpoint",
        )
        assert _engines(run), "the run's vLLM engine should be running"
        first.kill()  # SIGKILL: nothing cleans up; the kernel kills the engine (PDEATHSIG)
        assert not _none_left(run), "an orphan vLLM engine"
    with start_worker(_env()):
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), timeout=600, what="the resume")
        assert not _none_left(run, 5)
    assert done.status == Run.SUCCEEDED, (done.error_type, done.error_message)
    assert done.attempts == 2
    assert set(points_of(run.id).values()) == {1}  # every (key, step) once
    assert steps_of(run.id, "train/reward") == [1, 2, 3, 4]
    assert steps_of(run.id, "train/rollout_logp_gap") == [1, 2, 3, 4]
    assert steps_of(run.id, "sys/engine_startup_seconds")  # each attempt's first step
    assert (settings.DATA_DIR / "runs" / str(run.id) / "checkpoints" / "step-000004").is_dir()
    assert _orphan_weight_folders() == []  # the killed trainer's, swept by the resume


def _orphan_weight_folders() -> list[str]:
    """/dev/shm folders of vLLM weights whose trainer process is gone."""
    orphans = []
    for folder in Path("/dev/shm").glob("troupe-vllm-*-*"):
        try:
            os.kill(int(folder.name.split("-")[2]), 0)
        except ProcessLookupError:
            orphans.append(folder.name)
        except (ValueError, PermissionError):
            continue
    return orphans


def test_a_cancelled_vllm_run_leaves_no_process(alice, client):
    run = _queue(alice, steps=20)
    client.force_login(alice)
    with start_worker(_env()):
        wait_for(lambda: Run.objects.get(id=run.id).step >= 1, timeout=600, what="a step")
        client.post(f"/runs/{run.id}/cancel/")
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the cancel")
        assert not _none_left(run)
    assert done.status == Run.CANCELLED and done.step < 20


def test_a_model_vllm_cannot_serve_fails_the_run_naming_the_fix(alice):
    run = _queue(alice, model="tiny-s")  # head size 24
    with start_worker(_env()):
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), timeout=300, what="the failure")
    assert done.status == Run.FAILED
    assert "head size is 24" in done.error_message and "tiny-m" in done.error_message
