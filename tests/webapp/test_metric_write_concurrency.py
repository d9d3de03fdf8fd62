"""Concurrent `write_points` batches for one run on PostgreSQL: overlapping (key, step) pairs
sent in different orders must all be stored, never abort with `deadlock detected`.

Two writers upserting the same rows in opposite orders each lock a row the other needs next;
PostgreSQL then kills one of them. Each thread here has its own connection (Django's
connections are per thread) and commits, as two API requests or a worker and an API client do.
"""

import threading

import pytest
from django.db import connection

from webapp.experiments.models import MetricPoint
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 15
PAIRS = [(f"role/r{k}/grad_norm", step) for k in range(20) for step in range(25)]  # 500 pairs


def write_concurrently(run_id: int, batches: list[list]) -> list[BaseException]:
    barrier = threading.Barrier(len(batches))
    errors: list[BaseException] = []

    def write(batch):
        try:
            barrier.wait()
            write_points(run_id, batch)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=write, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_overlapping_batches_in_opposite_orders_never_deadlock(run):
    if connection.vendor != "postgresql":
        pytest.skip("row locks and deadlock detection are PostgreSQL's")
    errors = []
    for round_ in range(ROUNDS):
        forward = [(key, step, float(round_)) for key, step in PAIRS]
        backward = [(key, step, float(round_)) for key, step in reversed(PAIRS)]
        # The second half of the pairs again, shuffled by step: a third order.
        middle = sorted(forward[250:], key=lambda p: (p[1], p[0]))
        errors += write_concurrently(run.id, [forward, backward, middle])

    assert [f"{type(e).__name__}: {e}" for e in errors] == []
    assert MetricPoint.objects.filter(run=run).count() == len(PAIRS)
    assert set(MetricPoint.objects.filter(run=run).values_list("value", flat=True)) == {
        float(ROUNDS - 1)
    }


def test_a_batch_with_repeated_pairs_keeps_the_last_value_in_any_order(run):
    written = write_points(run.id, [("b", 2, 1.0), ("a", 1, 1.0), ("b", 2, 3.0), ("a", 0, 0.5)])

    assert written == 3
    assert sorted(MetricPoint.objects.filter(run=run).values_list("key", "step", "value")) == [
        ("a", 0, 0.5),
        ("a", 1, 1.0),
        ("b", 2, 3.0),
    ]
