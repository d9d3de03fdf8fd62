"""A swap job's attempts, in this process with a stand-in evaluator: an attempt after a worker
that died evaluates only the coalitions the last one did not store; an attempt that lost its
lease (the sweep queued the job again, another worker took it) stops and writes nothing, and
reports no success it could not store; a cancel stops a running job after its current
evaluation; and the job beats while an evaluation runs."""

import time

import pytest
from django.db.models import F

import trainer.mixed_eval
import trainer.role_sources
import workers.attribution
from analysis.attribution import attribute
from tests.people import make_experiment
from webapp.attribution.models import SwapJob
from webapp.attribution.queueing import cancel_job
from workers.attribution import claim, run_job

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ["generator", "aggregator"]
WORTH = {"generator": 0.5, "aggregator": 0.25}  # each role's part of the accuracy, additive
KEYS = ["-", "generator", "aggregator", "generator+aggregator"]
PROBLEMS = 4


def coalition_of(key: str) -> list[str]:
    return [] if key == "-" else key.split("+")


def evaluation(key: str) -> dict:
    accuracy = sum(WORTH[role] for role in coalition_of(key))
    return {"accuracy": accuracy, "per_problem": [accuracy] * PROBLEMS, "seconds": 0.0}


class Evaluator:
    """trainer.mixed_eval.MixedEvaluator's interface; `during` runs inside each evaluation."""

    evaluated: list[str] = []
    during = staticmethod(lambda: None)

    def __init__(self, config, plans):
        pass

    def evaluate(self, key: str) -> dict:
        Evaluator.evaluated.append(key)
        Evaluator.during()
        return evaluation(key)


@pytest.fixture(autouse=True)
def stand_in(monkeypatch):
    Evaluator.evaluated = []
    monkeypatch.setattr(Evaluator, "during", staticmethod(lambda: None))
    monkeypatch.setattr(trainer.mixed_eval, "MixedEvaluator", Evaluator)
    # A coalition's sources stand for themselves: the evaluator is handed its key.
    monkeypatch.setattr(
        trainer.role_sources,
        "resolve_sources",
        lambda sources, config, out, **_: (
            "+".join(r for r in ROLES if sources[r] == "latest") or "-"
        ),
    )


def queued_job(owner, stored: list[str], attempts: int) -> SwapJob:
    run = make_experiment(owner, workflow="voting", sharing="per_role").runs.get()
    plan = {
        "roles": ROLES,
        "evaluations": [
            {
                "key": key,
                "sources": {r: "latest" if r in coalition_of(key) else "base" for r in ROLES},
                "reuse_step": None,
            }
            for key in KEYS
        ],
    }
    stored_evaluations = {key: {**evaluation(key), "reused_step": None} for key in stored}
    return SwapJob.objects.create(
        run=run, kind="gain", plan=plan, evaluations=stored_evaluations, attempts=attempts
    )


def test_the_next_attempt_evaluates_only_what_the_last_did_not_store(alice):
    job = queued_job(alice, stored=["-", "generator"], attempts=1)

    answer = run_job(*claim(job.id, "second@node"))

    assert answer == {"job": job.id, "status": SwapJob.SUCCEEDED}
    assert Evaluator.evaluated == ["aggregator", "generator+aggregator"]
    job.refresh_from_db()
    assert job.attempts == 2 and set(job.evaluations) == set(KEYS)
    shares = {role: share["value"] for role, share in job.result["shares"].items()}
    assert shares == pytest.approx(WORTH)


def test_an_attempt_that_lost_its_lease_stops_and_writes_nothing(alice):
    job = queued_job(alice, stored=[], attempts=0)
    mine = claim(job.id, "slow@node")
    # The sweep took this worker for dead and another worker claimed the job meanwhile.
    Evaluator.during = staticmethod(
        lambda: SwapJob.objects.filter(id=job.id).update(attempts=F("attempts") + 1)
    )

    assert run_job(*mine) == {"job": job.id, "status": "lost"}

    assert Evaluator.evaluated == ["-"]
    job.refresh_from_db()
    assert job.status == SwapJob.RUNNING and job.evaluations == {} and job.attempts == 2


def test_a_job_beats_while_an_evaluation_runs(alice, settings):
    settings.TROUPE_HEARTBEAT_SECONDS = 1
    job = queued_job(alice, stored=["-", "generator", "aggregator"], attempts=0)
    mine, lease = claim(job.id, "busy@node")
    beats = []

    def wait_for_a_beat() -> None:  # the evaluation lasts until the row's heartbeat moves
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            beat = SwapJob.objects.get(id=job.id).heartbeat
            if beat > mine.heartbeat:
                beats.append(beat)
                return
            time.sleep(0.1)

    Evaluator.during = staticmethod(wait_for_a_beat)

    assert run_job(mine, lease)["status"] == SwapJob.SUCCEEDED
    assert beats, "no heartbeat while the evaluation ran"


def test_a_lease_lost_at_the_last_write_is_reported_lost_not_succeeded(alice, monkeypatch):
    job = queued_job(alice, stored=KEYS, attempts=0)  # nothing left to evaluate
    mine = claim(job.id, "slow@node")

    def taken_over_meanwhile(roles, table):
        SwapJob.objects.filter(id=job.id).update(attempts=F("attempts") + 1)
        return attribute(roles, table)

    monkeypatch.setattr(workers.attribution, "attribute", taken_over_meanwhile)

    assert run_job(*mine) == {"job": job.id, "status": "lost"}
    job.refresh_from_db()
    assert job.status == SwapJob.RUNNING and job.result is None


def test_a_cancel_stops_a_running_job_after_its_current_evaluation(alice):
    job = queued_job(alice, stored=[], attempts=0)
    mine = claim(job.id, "busy@node")
    Evaluator.during = staticmethod(lambda: cancel_job(job))

    assert run_job(*mine) == {"job": job.id, "status": SwapJob.CANCELLED}

    assert Evaluator.evaluated == ["-"]
    job.refresh_from_db()
    assert job.status == SwapJob.CANCELLED and job.finished and set(job.evaluations) == {"-"}
