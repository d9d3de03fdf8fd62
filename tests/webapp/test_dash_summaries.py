"""Key results from the database (webapp/runs/summaries.py) — the one path the pages,
the panel and the CLI share — and the demo experiment they are tested on."""

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from analysis.runs import summarize_run
from webapp.demo.build import LEAD, build_demo_experiment, demo_cells
from webapp.experiments.models import Experiment, Run
from webapp.metrics import read_series, write_points
from webapp.runs.summaries import cell_summaries, clear_cache, run_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(alice):
    clear_cache()
    yield alice
    clear_cache()


@pytest.fixture
def demo(owner):
    return build_demo_experiment(owner, runs=8, steps=80)


def test_run_summaries_are_the_analysis_of_each_runs_full_series(demo):
    run = demo.cliff_run
    series = {k: (v["steps"], v["values"]) for k, v in read_series(run.id, None, 0).items()}

    summary = run_summaries([run])[run.id]

    assert summary == summarize_run(series, running=False, sharing="per_role")
    assert summary["accuracy"]["cliff_onset"] == demo.cliff_onset
    assert summary["amplification"][demo.amplified_role] == demo.amplification_onset
    assert summary["lead"][demo.amplified_role] == LEAD
    assert run_summaries([demo.capture_run])[demo.capture_run.id]["capture"] == "generator"


def test_the_matrix_reads_accuracy_alone(demo):
    summary = run_summaries([demo.cliff_run], gradients=False)[demo.cliff_run.id]
    assert summary["accuracy"]["cliff_onset"] == demo.cliff_onset
    assert summary["roles"] == [] and summary["capture"] is None


def test_unfinished_runs_get_a_provisional_verdict(demo):
    Run.objects.filter(id=demo.cliff_run.id).update(status=Run.RUNNING)
    run = Run.objects.get(id=demo.cliff_run.id)
    assert run_summaries([run])[run.id]["accuracy"]["cliff_status"] == "provisional"


def test_cells_summarise_their_seeds_and_list_their_runs(owner):
    experiment = build_demo_experiment(owner, runs=48, steps=60).experiment  # 2 seeds a cell
    rows = cell_summaries(experiment)

    assert len(rows) == 24
    for row in rows:
        runs = Run.objects.filter(id__in=row.runs)
        assert {(r.workflow, r.task, r.model, r.sharing) for r in runs} == {
            (row.workflow, row.task, row.model, row.sharing)
        }
        assert sorted(r.seed for r in runs) == row.seeds == [0, 1]
        # Two seeds a cell: a mean, but no interval below 3 seeds.
        assert row.gain.mean is not None and row.gain.n == 2
        assert row.gain.low is None and row.gain.high is None
    shared_voting = next(r for r in rows if (r.workflow, r.sharing) == ("voting", "shared"))
    assert shared_voting.capture == "generator"


def test_reads_are_batched_whatever_the_number_of_runs(demo):
    runs = list(demo.experiment.runs.all())
    with CaptureQueriesContext(connection) as queries:
        run_summaries(runs)
    assert len(queries) == 2  # the signatures, then every stale run's points


def test_summaries_are_cached_until_a_run_gets_new_points(demo):
    runs = list(demo.experiment.runs.all())
    first = run_summaries(runs, gradients=False)
    with CaptureQueriesContext(connection) as queries:
        again = run_summaries(runs, gradients=False)
    assert again == first and len(queries) == 1  # the signatures only

    run = demo.capture_run
    write_points(run.id, [("eval/accuracy", 90, 0.0), ("eval/accuracy", 100, 0.0)])
    with CaptureQueriesContext(connection) as queries:
        changed = run_summaries(runs, gradients=False)
    assert len(queries) == 2
    assert changed[run.id]["accuracy"]["last_step"] == 100
    assert all(changed[r.id] == first[r.id] for r in runs if r.id != run.id)

    write_points(run.id, [("eval/accuracy", 100, 0.5)])  # a rewrite: same count, same step
    assert (
        run_summaries(runs, gradients=False)[run.id]["accuracy"]["final"]
        != (changed[run.id]["accuracy"]["final"])
    )


def test_a_run_without_points_gets_the_empty_summary(owner):
    experiment = Experiment.objects.create(owner=owner, name="empty")
    run = Run.objects.create(experiment=experiment, workflow="voting", sharing="shared")
    summary = run_summaries([run])[run.id]
    assert summary["accuracy"]["base"] is None and summary["accuracy"]["cliff_status"] == (
        "insufficient"
    )
    assert cell_summaries(experiment)[0].runs == [run.id]


# --- the demo experiment --------------------------------------------------------------------------


def test_the_demo_covers_every_cell_before_repeating_a_seed():
    cells = demo_cells(30)
    assert len({(c["workflow"], c["task"], c["model"], c["sharing"]) for c in cells[:24]}) == 24
    assert [c["seed"] for c in cells[23:26]] == [0, 1, 1]
    assert len(demo_cells()) == 72


def test_the_demo_runs_have_valid_configs_and_finished(demo):
    for run in demo.experiment.runs.all():
        assert run.status == Run.SUCCEEDED and run.step == run.total_steps == 80
        assert run.config["workflow"] == run.workflow and run.config["seed"] == run.seed
        assert len(run.config_hash) == 16


def test_load_demo_experiment_makes_one_for_a_user(owner, capsys):
    call_command("load_demo_experiment", "--runs", "5", "--steps", "60", "--user", "alice")

    experiment = Experiment.objects.get(owner=owner)
    assert experiment.runs.count() == 5
    assert f"/dash/matrix?experiment={experiment.id}" in capsys.readouterr().out


def test_load_demo_experiment_names_a_missing_user():
    with pytest.raises(CommandError, match="ensure_login"):
        call_command("load_demo_experiment", "--user", "nobody")
