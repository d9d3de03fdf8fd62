"""What can be known at submit is refused at submit, against what the workers advertise
(webapp/runs/worker_gpus.py, workers/capacity.py): a run whose memory no worker has (sizes
that once failed 6 s after queueing with a raw 256 GB allocator message), `device = cuda`
where no worker has a GPU; and a failed run offers Resume only where a resume could
succeed."""

import json

import pytest
from django.utils.html import escape

from tests.people import bearer, make_experiment
from tests.runs import form_data
from trainer.config import make_config
from webapp.experiments.models import Run
from webapp.runs.queueing import resume_run
from webapp.runs.worker_gpus import advertise
from workers.capacity import capacity

pytestmark = pytest.mark.django_db

ABSURD = {"max_new_tokens": 100_000_000}


def post(client, user, **config):
    body = {"name": "sizes", "preset": "cpu-demo", "config": config}
    return client.post(
        "/api/v1/experiments",
        json.dumps(body),
        content_type="application/json",
        headers=bearer(user),
    )


def cpu_workers() -> None:
    advertise("cpu@host", 1, gpu_memory_gb=None, memory_gb=16.0)


def test_a_run_bigger_than_every_workers_memory_is_refused_by_the_api(client, alice):
    cpu_workers()

    response = post(client, alice, **ABSURD)

    assert response.status_code == 400
    said = response.json()["fields"]["memory"]
    assert "GiB of memory on the CPU" in said and "the largest worker has 16 GiB" in said
    assert not Run.objects.exists()
    assert post(client, alice).status_code == 201  # the preset itself fits


def test_the_form_refuses_it_too(client, bob):
    cpu_workers()
    client.force_login(bob)

    html = client.post("/experiments/new/", form_data(max_new_tokens="100000000")).content
    assert "GiB of memory on the CPU" in html.decode()
    assert not Run.objects.exists()


def test_cuda_is_refused_where_no_worker_has_a_gpu(client, alice):
    cpu_workers()

    response = post(client, alice, device="cuda")

    assert response.status_code == 400
    assert "none of the workers has one" in response.json()["fields"]["config.device"]
    advertise("gpu@host", 1, gpu_memory_gb=80.0, memory_gb=512.0)
    assert post(client, alice, device="cuda").status_code == 201


def test_a_gpu_run_is_measured_against_the_workers_gpu_not_an_assumed_one(client, alice):
    advertise("gpu@host", 1, gpu_memory_gb=8.0, memory_gb=64.0)
    big = dict(model="Qwen/Qwen3-1.7B", finetune="full", device="cuda")

    response = post(client, alice, **big)

    assert response.status_code == 400
    assert "the GPU has 8 GiB" in response.json()["fields"]["memory"]


def test_with_no_worker_seen_nothing_is_refused_for_memory(client, alice):
    assert post(client, alice, device="cuda").status_code == 201


def test_a_worker_advertises_its_hosts_memory():
    seen = capacity()
    assert seen["gpus"] >= 1 and seen["memory_gb"] > 0


def failed_run(alice, **fields) -> Run:
    run = make_experiment(alice).runs.get()
    Run.objects.filter(id=run.id).update(status=Run.FAILED, **fields)
    run.refresh_from_db()
    return run


OOM = dict(
    error_type="RuntimeError",
    error_message="[enforce fail at alloc_cpu.cpp:116] data. DefaultCPUAllocator: not enough "
    "memory: you tried to allocate 274877906944 bytes.",
)


def test_a_run_out_of_memory_before_its_first_checkpoint_offers_no_resume(client, alice):
    run = failed_run(alice, **OOM)
    client.force_login(alice)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="resume-run"' not in page
    assert "ran out of memory before its first checkpoint" in page
    assert resume_run(run) is False
    response = client.post(f"/api/v1/runs/{run.id}/resume", headers=bearer(alice))
    assert response.status_code == 409 and "ran out of memory" in response.json()["error"]


def test_a_run_no_worker_could_take_now_offers_no_resume(client, alice):
    cpu_workers()
    run = failed_run(alice, error_type="WorkerLost", error_message="lost its worker 3 times")
    Run.objects.filter(id=run.id).update(config=make_config("cpu-demo").to_dict() | ABSURD)
    client.force_login(alice)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert 'id="resume-run"' not in page
    assert escape("A resume would be refused as a new run would") in page


def test_a_run_that_lost_its_worker_offers_resume(client, alice):
    run = failed_run(alice, error_type="WorkerLost", error_message="lost its worker 3 times")
    client.force_login(alice)

    assert 'id="resume-run"' in client.get(f"/runs/{run.id}/").content.decode()
    assert resume_run(run) is True


def test_an_out_of_memory_after_a_checkpoint_may_resume(alice):
    assert resume_run(failed_run(alice, checkpoint_step=20, **OOM)) is True
