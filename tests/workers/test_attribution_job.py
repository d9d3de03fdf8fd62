"""An attribution through a real worker: a cpu-demo voting per_role run whose aggregator is
frozen is trained by a worker, then "Attribute this run's gain" is planned (4 evaluations,
the 2 corners the run's own), queued from the run page and evaluated by the worker; the
frozen aggregator's share is exactly 0 and the generator carries the whole change. A
mix-and-match job queued through the API evaluates one mix, paired with the attribution's.
An attribution whose worker died before its last evaluation is queued again by the sweep and
finished by this worker, which evaluates only that one."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from tests.helpers import database_url, service_env, start_worker
from tests.runs import FAST_SWEEP, SMALL, run_in, wait_for
from webapp.attribution.models import SwapJob
from webapp.attribution.planning import plan_job
from webapp.experiments.models import Run
from webapp.runs.queueing import create_experiment

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

CONFIG = {**SMALL, "workflow": "voting", "sharing": "per_role", "frozen_roles": "aggregator"}


def test_a_frozen_roles_share_of_the_gain_is_exactly_zero(client, alice, tiny_model):
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        **FAST_SWEEP,
    )
    run = create_experiment(alice, "attribution", preset="cpu-demo", config=CONFIG).runs.get()
    client.force_login(alice)
    with start_worker(env):
        done = wait_for(lambda: run_in(run.id, *Run.FINISHED), what="the run")
        assert done.status == Run.SUCCEEDED, done.error_message
        plan = plan_job(done, "gain")
        assert plan.problem == "" and plan.method == "shapley"
        reused = {e["key"]: e["reuse_step"] for e in plan.evaluations}
        assert reused == {"-": 0, "generator": None, "aggregator": None, "generator+aggregator": 4}
        page = client.get(f"/runs/{run.id}/").content.decode()
        assert "4 evaluations (2 to run, the rest the run's own)" in page
        client.post(f"/runs/{run.id}/attribute/", {"kind": "gain"})
        mix = {"kind": "mix", "sources": {"generator": "latest"}}  # the aggregator: base
        client.post(f"/api/v1/runs/{run.id}/swap-jobs", mix, content_type="application/json")
        finished = ["succeeded", "failed"]
        wait_for(
            lambda: SwapJob.objects.filter(run=run, status__in=finished).count() == 2,
            what="the attribution and the mix",
        )
        dead = died_before_its_last_evaluation(SwapJob.objects.get(kind="gain"), "generator")
        resumed = wait_for(
            lambda: SwapJob.objects.filter(id=dead.id, status__in=finished).first(),
            what="the attribution whose worker died",
        )
    job, mixed = (
        SwapJob.objects.exclude(id=dead.id).get(kind="gain"),
        SwapJob.objects.get(kind="mix"),
    )
    assert job.status == SwapJob.SUCCEEDED, job.error
    result = job.result
    assert result["shares"]["aggregator"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert result["shares"]["generator"]["value"] == pytest.approx(result["change"]["value"])
    assert job.evaluations["-"]["reused_step"] == 0
    assert len(job.evaluations["generator"]["per_problem"]) == SMALL["eval_problems"]
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'data-role="aggregator" data-value="0.0"' in page
    api = client.get(f"/api/v1/swap-jobs/{job.id}").json()
    assert api["result"] == result and api["plan"]["roles"] == ["generator", "aggregator"]
    # one mix, evaluated by a job of its own: paired with the attribution's coalition
    assert mixed.status == SwapJob.SUCCEEDED and mixed.result is None, mixed.error
    (evaluation,) = mixed.evaluations.values()
    assert evaluation["per_problem"] == job.evaluations["generator"]["per_problem"]
    # the dead worker's job: queued again, the missing evaluation run, the same attribution
    assert resumed.status == SwapJob.SUCCEEDED and resumed.attempts == 2, resumed.error
    assert resumed.worker != dead.worker
    evaluated = resumed.evaluations["generator"]
    assert evaluated["seconds"] > 0
    assert evaluated["per_problem"] == job.evaluations["generator"]["per_problem"]
    assert resumed.result["shares"] == result["shares"]


def died_before_its_last_evaluation(job: SwapJob, missing: str) -> SwapJob:
    """A copy of `job` as a worker left it that died before evaluating `missing`: running, its
    heartbeat an hour old, every other evaluation stored."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    return SwapJob.objects.create(
        run=job.run,
        kind=job.kind,
        plan=job.plan,
        status=SwapJob.RUNNING,
        worker="gone@node-3",
        attempts=1,
        started=an_hour_ago,
        heartbeat=an_hour_ago,
        evaluations={k: e for k, e in job.evaluations.items() if k != missing},
    )
