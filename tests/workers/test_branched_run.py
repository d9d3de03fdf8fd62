"""A branched run trained by a real worker: its config names the frozen checkpoint relative to
the data directory (no folder of the server shown to users), and the worker still starts it
from that checkpoint; a child stored the older way, with the absolute path, starts as well."""

import pytest
from django.conf import settings

from tests.helpers import database_url, service_env, start_worker
from tests.runs import FAST_SWEEP, SMALL, run_in, wait_for
from trainer.config import config_from_dict
from webapp.branching.branch import plan_branches, queue_branches
from webapp.experiments.models import Run, RunLog
from webapp.runs.queueing import create_experiment, new_run, send_run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def test_a_branched_run_starts_from_its_frozen_checkpoint(alice, tiny_model):
    env = service_env(
        DATABASE_URL=database_url(settings.DATABASES["default"]),
        TROUPE_DATA_DIR=str(settings.DATA_DIR),
        **FAST_SWEEP,
    )
    parent = create_experiment(alice, "parent", preset="cpu-demo", config=SMALL).runs.get()
    with start_worker(env):
        done = wait_for(lambda: run_in(parent.id, *Run.FINISHED), what="the parent")
        assert done.status == Run.SUCCEEDED, done.error_message
        (relative,) = queue_branches(plan_branches(done, "latest", [], control=True))
        start = relative.config["init_from"]
        assert start.startswith("branch-points/") and str(settings.DATA_DIR) not in start
        # a row stored before: the absolute path of the same branch point
        absolute = {**relative.config, "init_from": str(settings.DATA_DIR / start)}
        older = new_run(done.experiment, config_from_dict(absolute))
        older.parent, older.branch_step = done, relative.branch_step
        older.save()
        send_run(older)
        children = [
            wait_for(lambda r=r: run_in(r.id, *Run.FINISHED), what="a child")
            for r in (relative, older)
        ]
    for child in children:
        assert child.status == Run.SUCCEEDED, child.error_message
        assert child.step == child.total_steps > SMALL["steps"]
        lines = list(RunLog.objects.filter(run=child).values_list("line", flat=True))
        assert any("branching from step-000004 (step 4)" in line for line in lines), lines
