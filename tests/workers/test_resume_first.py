"""A handed-back run keeps its place in the queue: after `make run` stops a worker mid-run
("Queued again to resume on the next start"), the next worker resumes that run before the
runs queued behind it, although its new message comes after theirs (workers/execute.py,
`claim_next`). And a run that resumes from a checkpoint before the step it had reached says
so, rather than its progress going back without a word (`rewind`)."""

import time

import pytest
from django.db import transaction

from tests.people import make_experiment
from webapp.experiments.models import Run, RunLog
from webapp.runs.queueing import hand_back_runs, send_run
from workers.execute import claim, claim_next, rewind
from workers.reporter import DatabaseReporter

BROKEN = {"steps": -1}  # fails at once, on the worker, so the order is quick to see


def handed_back_and_behind(owner) -> tuple[Run, Run]:
    """Run A was training on a worker that `make run` stopped; run B was queued after A."""
    first, behind = make_experiment(owner, runs=2).runs.order_by("id")
    Run.objects.filter(id=first.id).update(status=Run.RUNNING, worker="cpu@stopped", attempts=1)
    return first, behind


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_resumes_the_handed_back_run_before_the_one_queued_behind_it(
    celery_worker, alice
):
    first, behind = handed_back_and_behind(alice)
    for run in (first, behind):
        Run.objects.filter(id=run.id).update(config={**run.config, **BROKEN})
    with transaction.atomic():
        transaction.on_commit(lambda: send_run(behind))  # its message is already waiting
        assert hand_back_runs("cpu@stopped") == [first.id]  # sent after, at the commit

    deadline = time.monotonic() + 540
    while Run.objects.filter(id__in=[first.id, behind.id], status__in=Run.ACTIVE).exists():
        assert time.monotonic() < deadline, celery_worker.log_tail()
        time.sleep(0.5)

    failed = RunLog.objects.filter(line__startswith="Failed:").order_by("id")
    assert [line.run_id for line in failed] == [first.id, behind.id]
    assert Run.objects.get(id=first.id).attempts == 2


@pytest.mark.django_db
def test_any_message_of_the_queue_claims_its_first_run_and_the_last_finds_none(alice):
    first, behind = handed_back_and_behind(alice)
    hand_back_runs("cpu@stopped")

    assert claim_next(behind.id, "cpu@a", "t1").id == first.id
    assert claim_next(first.id, "cpu@a", "t2").id == behind.id
    assert claim_next(behind.id, "cpu@a", "t3") is None


@pytest.mark.django_db
def test_a_resume_from_an_earlier_checkpoint_says_its_progress_went_back(run):
    Run.objects.filter(id=run.id).update(step=49, total_steps=500, attempts=1)
    mine = claim(run.id, "cpu@a", "t1")
    reporter = DatabaseReporter(run.id, mine.attempts)

    rewind(mine, 40, reporter)
    reporter.close()

    run.refresh_from_db()
    assert (run.step, run.rewound_from) == (40, 49)
    assert "it had reached step 49" in run.step_words
    assert RunLog.objects.filter(run=run, line__contains="from step 49 to step 40").exists()
