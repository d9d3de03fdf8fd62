"""A task goes from a client through a real broker to a real worker process and back: through
Redis, and through the embedded filesystem broker; and a worker takes only its own queues."""

import pytest
from celery.exceptions import TimeoutError as NoReply
from django.db import connection

from tests.helpers import service_env, start_worker
from workers.tasks import ping


def test_ping_goes_through_redis_to_a_real_worker_and_back(redis_url, tmp_path):
    env = service_env(CELERY_BROKER_URL=redis_url, TROUPE_DATA_DIR=str(tmp_path))

    with start_worker(env) as worker:
        reply = worker.ping()

    assert reply["pong"] is True
    assert reply["hostname"] == worker.name
    # Tasks run in the pool's child process, not in the worker's parent.
    assert reply["pid"] != worker.pid


def test_ping_goes_through_the_embedded_broker_to_a_real_worker_and_back(tmp_path):
    env = service_env(CELERY_BROKER_URL=None, TROUPE_DATA_DIR=str(tmp_path))

    with start_worker(env) as worker:
        reply = worker.ping()

    assert reply == {"pong": True, "hostname": worker.name, "pid": reply["pid"]}
    # The message went through the folders under the data directory, not some default place.
    assert list((tmp_path / "broker/processed").glob("*.cpu.msg"))
    assert list((tmp_path / "results").iterdir())


def test_a_gpu_worker_does_not_take_tasks_queued_for_cpu(tmp_path):
    env = service_env(CELERY_BROKER_URL=None, TROUPE_DATA_DIR=str(tmp_path))

    with start_worker(env, queues="gpu") as worker:
        with pytest.raises(AssertionError, match="No worker answered on queue 'cpu'"):
            worker.ping(timeout=2, queue="cpu")
        assert worker.ping(queue="gpu")["hostname"] == worker.name

    assert len(list((tmp_path / "broker/queue").glob("*.cpu.msg"))) == 1


def test_the_session_worker_runs_tasks_sent_from_the_test_process(celery_worker):
    result = ping.delay()
    try:
        # Generous, and the worker's log if no reply comes: CI once had none within 30 s while
        # the other test process kept the same two cores busy.
        reply = result.get(timeout=120)
    except NoReply as exc:
        raise AssertionError(f"no reply; worker log:\n{celery_worker.log_tail()}") from exc

    assert reply["hostname"] == celery_worker.name
    # Wired to the test database, where the test's committed rows are.
    assert celery_worker.env["DATABASE_URL"].endswith(str(connection.settings_dict["NAME"]))
