"""A run an MLflow client deleted (`runs/delete`), and every run of an experiment it deleted,
is gone from every view a reader compares runs in, until restored: the experiment list and
page, the statistics, the run page's branches, the alerts, the panel's pickers, comparisons
and matrix, and the API's lists and many-run series (`webapp/runs/lifecycle.py`). Its own page
and its own `GET` still answer, so it can be restored.

Each surface is one function of the world below: the ids of its runs it shows, or how many of
them it counts, or whether it shows the experiment. The deletes and restores are the MLflow
store's own (`webapp/tracking/store.py`), as `runs/delete` and `experiments/delete` make them.
"""

from dataclasses import dataclass

import pytest

from tests.stats_runs import flat, sharing_pairs, stored_run
from vocabulary.names import ACCURACY_KEY, BEHAVIOUR_KEYS
from webapp.attribution.matrix import attribution_cells
from webapp.dashboards import components, data
from webapp.dashboards.pages import compare
from webapp.experiments.models import Alert, Experiment, Run
from webapp.runs.behaviour_cells import behaviour_cells
from webapp.runs.summaries import clear_cache
from webapp.stats.page import experiment_stats, queue_more_seeds
from webapp.tracking import store

pytestmark = pytest.mark.django_db

BEHAVIOUR = BEHAVIOUR_KEYS[0]


@dataclass
class World:
    experiment: Experiment
    kept: Run  # a root run nobody deletes
    gone: Run  # a root run of the same cell, the other sharing mode: its pair
    branch: Run  # a branch of `kept`
    client: object  # Django's test client, signed in as the owner

    @property
    def runs(self) -> list[Run]:
        return [self.kept, self.gone, self.branch]


@pytest.fixture
def world(alice, client) -> World:
    clear_cache()
    experiment = Experiment.objects.create(owner=alice, name="soft delete", preset="cpu-demo")
    runs = [
        stored_run(
            experiment,
            seed=0,
            sharing=sharing,
            accuracy=flat(0.5),
            extra=[(BEHAVIOUR, 10, 0.5)],
        )
        for sharing in ("shared", "per_role")
    ]
    branch = stored_run(experiment, seed=0, sharing="shared", accuracy=flat(0.6))
    Run.objects.filter(id=branch.id).update(parent=runs[0], branch_step=10)
    for run in [*runs, branch]:
        Alert.objects.create(run=run, kind="cliff", key=ACCURACY_KEY, step=40, seen_at=50)
    client.force_login(alice)
    with data.viewing_as(alice):
        yield World(experiment, runs[0], runs[1], Run.objects.get(id=branch.id), client)
    clear_cache()


def _json(world: World, url: str) -> dict:
    response = world.client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def _ids(world: World) -> str:
    return ",".join(str(run.id) for run in world.runs)


# --- the surfaces: which of the world's runs each shows --------------------------------------


def experiment_live_json(world: World) -> set[int]:
    return {r["id"] for r in _json(world, f"/experiments/{world.experiment.id}/live.json")["runs"]}


def run_page_branches(world: World) -> set[int]:
    page = world.client.get(f"/runs/{world.kept.id}/").content.decode()
    return {run.id for run in world.runs if run != world.kept and f"/runs/{run.id}/" in page}


def alerts_page(world: World) -> set[int]:
    return {alert.run_id for alert in world.client.get("/alerts/").context["alerts"]}


def alerts_api(world: World) -> set[int]:
    return {alert["run"] for alert in _json(world, "/api/v1/alerts")["alerts"]}


def api_experiment(world: World) -> set[int]:
    return {r["id"] for r in _json(world, f"/api/v1/experiments/{world.experiment.id}")["runs"]}


def api_runs(world: World) -> set[int]:
    return {r["id"] for r in _json(world, f"/api/v1/runs?experiment={world.experiment.id}")["runs"]}


def api_run_branches(world: World) -> set[int]:
    lineage = _json(world, f"/api/v1/runs/{world.kept.id}")["lineage"]
    return {child["id"] for child in lineage["children"]}


def api_series_of_experiment(world: World) -> set[int]:
    url = f"/api/v1/metrics?experiment={world.experiment.id}&keys={ACCURACY_KEY}"
    return {int(run_id) for run_id in _json(world, url)["runs"]}


def panel_compare_picker(world: World) -> set[int]:
    return {option["value"] for option in compare.run_options(str(world.kept.id))}


def panel_runs_named(world: World) -> set[int]:
    """What /dash/compare, /dash/gradients and /dash/bands draw of `?runs=`."""
    return {run.id for run in data.runs(data.viewer(), [run.id for run in world.runs])}


def panel_bands_of_experiment(world: World) -> set[int]:
    return set(data.experiment_run_ids(data.viewer(), world.experiment.id))


def panel_behaviour_matrix(world: World) -> set[int]:
    return {i for cell in behaviour_cells(world.experiment, BEHAVIOUR) for i in cell["runs"]}


def panel_attribution(world: World) -> set[int]:
    """The runs of the cells /dash/attribution draws (`attribution.update`'s rows)."""
    rows = attribution_cells(data.experiment_seeds(world.experiment))
    return {run_id for row in rows for run_id in row["run_ids"]}


RUN_LISTS = [
    experiment_live_json,
    run_page_branches,
    alerts_page,
    alerts_api,
    api_experiment,
    api_runs,
    api_run_branches,
    api_series_of_experiment,
    panel_compare_picker,
    panel_runs_named,
    panel_bands_of_experiment,
    panel_behaviour_matrix,
    panel_attribution,
]


# --- the surfaces: how many of the world's runs each counts ----------------------------------


def listed_experiment(rows, world: World):
    return next((e for e in rows if e.id == world.experiment.id), None)


def experiment_list_count(world: World) -> int:
    row = listed_experiment(world.client.get("/experiments/").context["page"], world)
    return row.n_runs if row else 0


def api_experiment_list_count(world: World) -> int:
    rows = _json(world, "/api/v1/experiments")["experiments"]
    return sum(next((e["run_counts"] for e in rows if e["id"] == world.experiment.id), {}).values())


def stats_count(world: World) -> int:
    return experiment_stats(world.experiment)["runs"]["total"]


def stats_api_count(world: World) -> int:
    return _json(world, f"/api/v1/experiments/{world.experiment.id}/stats")["runs"]["total"]


def panel_experiments_count(world: World) -> int:
    row = listed_experiment(data.experiments(data.viewer()), world)
    return row.n_runs if row else 0


def panel_matrix_status_count(world: World) -> int:
    return sum(data.experiment_status_counts(world.experiment).values())


COUNTS = [
    experiment_list_count,
    api_experiment_list_count,
    stats_count,
    stats_api_count,
    panel_experiments_count,
    panel_matrix_status_count,
]


# --- the surfaces: whether each shows the experiment -----------------------------------------


def api_experiment_list_shows(world: World) -> bool:
    rows = _json(world, "/api/v1/experiments")["experiments"]
    return world.experiment.id in {e["id"] for e in rows}


def panel_picker_shows(world: World) -> bool:
    return world.experiment.id in {
        option["value"] for option in components.experiment_options(None)
    }


def panel_matrix_shows(world: World) -> bool:
    return data.experiment(data.viewer(), world.experiment.id) is not None


def alerts_filter_shows(world: World) -> bool:
    return world.experiment in world.client.get("/alerts/").context["experiments"]


# The experiment list hid a deleted experiment already (tests/webapp/test_mlflow_soft_delete.py).
EXPERIMENT_VIEWS = [
    api_experiment_list_shows,
    panel_picker_shows,
    panel_matrix_shows,
    alerts_filter_shows,
]


# --- the tests -----------------------------------------------------------------------------------


def delete_runs(world: World) -> None:
    for run in (world.gone, world.branch):
        store.delete_run(run)


def restore_runs(world: World) -> None:
    for run in (world.gone, world.branch):
        store.restore_run(run)


@pytest.mark.parametrize("surface", RUN_LISTS, ids=lambda f: f.__name__)
def test_a_deleted_run_is_left_out_until_restored(world, surface):
    shown = surface(world)
    deleted = {world.gone.id, world.branch.id}
    assert shown & deleted, "the surface showed none of the runs this test deletes"

    delete_runs(world)
    assert surface(world) == shown - deleted

    restore_runs(world)
    assert surface(world) == shown


@pytest.mark.parametrize("surface", COUNTS, ids=lambda f: f.__name__)
def test_a_deleted_run_is_not_counted_until_restored(world, surface):
    assert surface(world) == 3

    delete_runs(world)
    assert surface(world) == 1

    restore_runs(world)
    assert surface(world) == 3


def delete_experiment_then_add_a_run(world: World) -> Run:
    """The experiment deleted, then a run made in it on Troupe's pages (as a branch or a
    queued seed would be): deleting marked the runs it had, not this one."""
    store.delete_experiment(world.experiment)
    return stored_run(world.experiment, seed=1, sharing="shared", accuracy=flat(0.5))


@pytest.mark.parametrize("surface", RUN_LISTS, ids=lambda f: f.__name__)
def test_the_runs_of_a_deleted_experiment_are_left_out(world, surface):
    shown = surface(world)
    late = delete_experiment_then_add_a_run(world)
    assert surface(world) == set()

    store.restore_experiment(world.experiment)
    assert surface(world) - {late.id} == shown


@pytest.mark.parametrize(
    "surface", [c for c in COUNTS if c is not experiment_list_count], ids=lambda f: f.__name__
)
def test_the_runs_of_a_deleted_experiment_are_not_counted(world, surface):
    delete_experiment_then_add_a_run(world)
    assert surface(world) == 0

    store.restore_experiment(world.experiment)
    assert surface(world) == 4


@pytest.mark.parametrize("surface", EXPERIMENT_VIEWS, ids=lambda f: f.__name__)
def test_a_deleted_experiment_is_left_out_until_restored(world, surface):
    assert surface(world)

    store.delete_experiment(world.experiment)
    assert not surface(world)

    store.restore_experiment(world.experiment)
    assert surface(world)


def test_a_deleted_runs_own_page_and_get_still_answer(world):
    delete_runs(world)
    page = world.client.get(f"/runs/{world.gone.id}/")
    assert page.status_code == 200 and 'id="deleted-note"' in page.content.decode()
    assert _json(world, f"/api/v1/runs/{world.gone.id}")["id"] == world.gone.id
    series = _json(world, f"/api/v1/runs/{world.gone.id}/metrics?keys={ACCURACY_KEY}")
    assert series["series"][ACCURACY_KEY]["values"] == flat(0.5)
    # Named, as a GET names it: a client asking for these runs' series gets every one.
    named = _json(world, f"/api/v1/metrics?runs={_ids(world)}&keys={ACCURACY_KEY}")["runs"]
    assert {int(run_id) for run_id in named} == {run.id for run in world.runs}


def test_queueing_more_seeds_copies_no_deleted_run_and_skips_its_seed(alice):
    """The statistics page's "queue more seeds" reads the live runs (the newest of a cell is
    the one it copies), yet numbers new seeds past a deleted run's: restored, it keeps its
    place."""
    clear_cache()
    experiment = Experiment.objects.create(owner=alice, name="more seeds", preset="cpu-demo")
    sharing_pairs(experiment, [0.08, -0.02, 0.06, 0.0])  # undecided: 16 more pairs wanted
    for sharing in ("shared", "per_role"):
        run = stored_run(experiment, seed=4, sharing=sharing, accuracy=flat(0.9))
        Run.objects.filter(id=run.id).update(config={**run.config, "lr": 0.123})
        store.delete_run(run)

    queued = Run.objects.filter(id__in=queue_more_seeds(experiment)["queued"])

    assert queued.count() == 32
    assert min(run.seed for run in queued) == 5
    assert all(run.config["lr"] != 0.123 for run in queued)
