"""The panel counts seeds by the statistics page's rule (a failed or cancelled run is not a
seed, and the page says how many it left out), and its tables name verdicts in the words of
the run and experiment pages (`analysis.cliffs.cliff_label`), never by their codes."""

import pytest

from tests.stats_runs import flat, stored_run
from tests.webapp.test_dash_callbacks import read_table
from webapp.dashboards import data, tables
from webapp.dashboards.pages import attribution, bands, compare, matrix
from webapp.experiments.models import Experiment, Run
from webapp.runs.summaries import clear_cache, run_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def one_seed_two_cancelled(alice):
    """One cell: seed 0 succeeded, seeds 1 and 2 cancelled before their first step."""
    experiment = Experiment.objects.create(owner=alice, name="cancelled", preset="cpu-demo")
    kept = stored_run(experiment, seed=0, sharing="shared", accuracy=flat(0.6))
    for seed in (1, 2):
        stored_run(experiment, seed=seed, sharing="shared", accuracy=None, status=Run.CANCELLED)
    return experiment, kept


def _by_heading(table) -> list[dict[str, str]]:
    """A rendered table (sortable or not) as {heading: cell text} rows."""
    head, body = table.children
    names = [_cell(th).strip() for th in head.children.children]
    return [dict(zip(names, map(_cell, tr.children), strict=True)) for tr in body.children]


def _cell(node) -> str:
    while not isinstance(node, str):
        node = node.children[0] if isinstance(node.children, list) else node.children
    return node


def _text(children) -> str:
    return " ".join(str(getattr(c, "children", c)) for c in children)


def test_the_matrix_counts_a_cancelled_run_as_no_seed_and_says_so(one_seed_two_cancelled, bob):
    experiment, kept = one_seed_two_cancelled
    with data.viewing_as(bob):
        _figure, table, status, _off = matrix.update_matrix(experiment.id, "gain", 0)
    (row,) = read_table(table, tables.CELL_COLUMNS)
    assert row["n_seeds"] == "1"
    assert row["compare"] == "compare 1 →"
    assert "2 runs left out (2 cancelled)" in _text(status)


def test_the_attribution_view_counts_seeds_only(one_seed_two_cancelled, bob):
    experiment, _kept = one_seed_two_cancelled
    with data.viewing_as(bob):
        _figure, table = attribution.update(experiment.id)
    rows = read_table(table, attribution.COLUMNS)
    assert rows and {r["attributed_text"] for r in rows} == {"0 of 1"}


def test_the_seed_bands_leave_cancelled_runs_out_of_the_bands_and_the_table(
    one_seed_two_cancelled, bob
):
    experiment, kept = one_seed_two_cancelled
    ids = list(experiment.runs.order_by("id").values_list("id", flat=True))
    with data.viewing_as(bob):
        table = bands.update_table(ids, "sharing", {}, 0)
        _figure, status, _off, _links = bands.update_bands(
            ids, "eval/accuracy", "sharing", "0", "ci", "linear", 0
        )
    assert [r["Run"] for r in _by_heading(table)] == [str(kept.id)]
    assert "2 runs left out (2 cancelled)" in _text(status)


def test_the_compare_and_bands_tables_name_verdicts_as_the_run_page_does(alice, bob):
    experiment = Experiment.objects.create(owner=alice, name="words", preset="cpu-demo")
    few = stored_run(
        experiment,
        seed=0,
        sharing="shared",
        accuracy=None,
        extra=[("eval/accuracy", 0, 0.2), ("eval/accuracy", 10, 0.3)],
    )
    low = stored_run(experiment, seed=1, sharing="shared", accuracy=[0.0] * 10)
    running = stored_run(
        experiment, seed=2, sharing="shared", accuracy=flat(0.5), status=Run.RUNNING
    )
    ids = [few.id, low.id, running.id]
    expected = ["too few evaluations", "cannot judge: accuracy too low", "none so far"]
    with data.viewing_as(bob):
        compared = compare.update_compare(ids, "eval/accuracy", "0", "sharing", 0)[1]
        banded = bands.update_table(ids, "seed", {}, 0)
    assert [r["cliff"] for r in read_table(compared, tables.RUN_COLUMNS)] == expected
    assert [r["Cliff"] for r in _by_heading(banded)] == expected
    runs = data.runs(bob, ids)
    csv = tables.to_csv(tables.run_rows(runs, run_summaries(runs)), tables.RUN_CSV)
    assert "too few evaluations" in csv  # the download says it in the same words
