"""Two simultaneous first writes to one MLflow run, one of a key (`loss`) and one of its Troupe
alias (`train/loss`), each in its own thread and connection as two requests are: every key the
client logged must read back exactly as logged, whichever batch the database takes first.

The interleaving that lost data is forced, not hoped for: the first batch pauses inside its
transaction after writing its points (before it commits), and is let go only once the second
batch is waiting on a lock (PostgreSQL says so in `pg_stat_activity`). Had the second one read
the run's bookkeeping without waiting, it would have taken `train/loss` for an alias of `loss`
(the first's points were not committed yet), written the copies over the client's own points,
and a later `train/loss` batch would have deleted them as an alias's. On SQLite a write
transaction takes the database's lock when it starts (`transaction_mode` IMMEDIATE), so the
second batch waits there; the test then checks the same outcome.
"""

import threading
import time

import pytest
from django.db import connection

from webapp.experiments.models import MetricPoint
from webapp.metrics import history_json
from webapp.metrics.earlier import every_point_json
from webapp.tracking import store
from webapp.tracking.store import Point

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

OWN = [Point("train/loss", 2.0, 1_000, 0), Point("train/loss", 3.0, 1_000, 1)]
ORIGINAL = [Point("loss", 8.0, 1_000, 0), Point("loss", 9.0, 1_000, 1)]
LATER_OWN = [Point("train/loss", 4.0, 2_000, 2)]
LATER_ORIGINAL = [Point("loss", 10.0, 2_000, 2)]


def new_run(alice):
    experiment = store.create_experiment(alice, "alias race", {})
    return store.create_run(alice, experiment, name="r", start_time=1, tags={}, user_id="")


def wait_until_blocked(thread: threading.Thread, deadline_s: float = 60.0) -> None:
    """Return once `thread`'s batch waits on a lock another transaction holds (PostgreSQL),
    or once it has been started (SQLite: see the module docstring)."""
    if connection.vendor != "postgresql":
        return
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database()"
    )
    end = time.monotonic() + deadline_s
    with connection.cursor() as cursor:
        while time.monotonic() < end and thread.is_alive():
            cursor.execute(query)
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)  # polling a condition, not waiting for one to happen by chance
    raise AssertionError("the second batch never waited for the first")


def log_first_then_second(monkeypatch, run_id: int, first: list[Point], second: list[Point]):
    """`first` writes its points and holds its transaction open; `second` starts and waits
    on it; then `first` commits. Each in its own thread, with its own connection."""
    written, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    real_record_points = store.record_points

    def pausing_record_points(run_id_, points):  # runs inside log_batch's transaction
        written_ = real_record_points(run_id_, points)
        if threading.current_thread().name == "first":
            written.set()
            assert release.wait(60), "never released"
        return written_

    monkeypatch.setattr(store, "record_points", pausing_record_points)

    def log(points):
        try:
            run = store.find_run(None, str(run_id))  # as a request finds it: before the lock
            store.log_batch(run, points, {}, {})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    one = threading.Thread(target=log, args=(first,), name="first")
    two = threading.Thread(target=log, args=(second,), name="second")
    one.start()
    assert written.wait(60), "the first batch never wrote"
    two.start()
    try:
        wait_until_blocked(two)
    finally:
        release.set()
        one.join()
        two.join()
    monkeypatch.setattr(store, "record_points", real_record_points)
    assert [repr(e) for e in errors] == []


def read_back(run_id: int, key: str) -> list[tuple[int, float]]:
    """What MLflow's get-history returns for the key: every point, in step order."""
    points = every_point_json(run_id, key, history_json(run_id, key, -(2**63), None)[0])
    return [(p["step"], p["value"]) for p in points]


def standing(run_id: int, key: str) -> dict[int, float]:
    rows = MetricPoint.objects.filter(run_id=run_id, key=key).values_list("step", "value")
    return dict(rows)


@pytest.mark.parametrize("own_first", [True, False], ids=["own-key-first", "alias-source-first"])
def test_a_key_and_its_alias_logged_at_once_each_read_back_as_logged(alice, monkeypatch, own_first):
    run = new_run(alice)
    if own_first:
        log_first_then_second(monkeypatch, run.id, OWN, ORIGINAL)
    else:
        log_first_then_second(monkeypatch, run.id, ORIGINAL, OWN)
    # Later batches of each: an alias never adds to, or removes, the client's own key.
    run = store.find_run(alice, str(run.id))
    store.log_batch(run, LATER_ORIGINAL, {}, {})
    store.log_batch(run, LATER_OWN, {}, {})
    store.log_batch(run, LATER_ORIGINAL, {}, {})

    assert read_back(run.id, "train/loss") == [(0, 2.0), (1, 3.0), (2, 4.0)]
    assert read_back(run.id, "loss") == [(0, 8.0), (1, 9.0), (2, 10.0)]
    assert standing(run.id, "train/loss") == {0: 2.0, 1: 3.0, 2: 4.0}
    tracked = store.find_run(alice, str(run.id)).tracked
    assert tracked.shadowed == {"train/loss": "loss"} and "train/loss" not in tracked.aliases
