"""The matrix coloured by a behaviour metric: per cell, the mean over seeds of each run's final
(last logged) or peak value, on a fixed 0–1 scale for shares; blank where no run logged it."""

import pytest

from tests.people import make_experiment
from webapp.dashboards import data, figures
from webapp.dashboards.pages import matrix
from webapp.metrics import write_points
from webapp.runs.behaviour_cells import behaviour_cells, run_value

pytestmark = pytest.mark.django_db

AGREE = "behav/voter_agreement"


@pytest.fixture
def experiment(alice):
    # Two seeds of one voting cell, and one eval-opt run that never logs voter agreement.
    experiment = make_experiment(alice, runs=2, workflow="voting")
    other = make_experiment(alice, name="other", runs=1, workflow="eval_opt").runs.get()
    other.experiment = experiment
    other.seed = 5
    other.save(update_fields=["experiment", "seed"])
    first, second = experiment.runs.filter(workflow="voting").order_by("seed")
    # Seed 0 ends at .5 after peaking at 1; seed 1 ends at .75, its peak.
    write_points(first.id, [(AGREE, 1, 0.25), (AGREE, 2, 1.0), (AGREE, 3, 0.5)])
    write_points(second.id, [(AGREE, 1, 0.5), (AGREE, 3, 0.75), (AGREE, 2, None)])
    return experiment


def test_cells_average_each_runs_final_or_peak_value(experiment):
    cells = {c["workflow"]: c for c in behaviour_cells(experiment, AGREE, "final")}
    assert cells["voting"]["mean"] == pytest.approx((0.5 + 0.75) / 2)
    assert cells["voting"]["n"] == 2
    assert cells["eval_opt"]["mean"] is None and cells["eval_opt"]["n"] == 0
    peaks = {c["workflow"]: c for c in behaviour_cells(experiment, AGREE, "peak")}
    assert peaks["voting"]["mean"] == pytest.approx((1.0 + 0.75) / 2)


def test_bad_choices_are_named(experiment):
    with pytest.raises(ValueError, match="'eval/accuracy' is not a behaviour metric"):
        behaviour_cells(experiment, "eval/accuracy")
    with pytest.raises(ValueError, match="at must be final or peak, not 'mean'"):
        behaviour_cells(experiment, AGREE, "mean")
    assert run_value(None, "final") is None
    assert run_value({"steps": [1], "values": [None]}, "peak") is None


def test_the_matrix_page_colours_by_the_chosen_metric(experiment, bob):
    with data.viewing_as(bob):
        figure, _, _, _ = matrix.update_matrix(experiment.id, "behaviour", 0, AGREE, "peak")
    (heatmap,) = [t for t in figure.data if t.type == "heatmap"]
    values = [v for row in heatmap.z for v in row if v is not None]
    assert values == [pytest.approx(0.875)]
    assert "not logged" in str(heatmap.text)  # the eval-opt cell: blank, and says why
    axis = figure.layout.coloraxis
    assert (axis.cmin, axis.cmax) == (0.0, 1.0)
    assert (
        axis.colorbar.title.text.replace("<br>", " ")
        == "voter agreement, peak value (mean over seeds)"
    )
    # A metric nobody logged draws a figure that says so; the URL keeps the choice.
    with data.viewing_as(bob):
        empty = matrix.update_matrix(experiment.id, "behaviour", 0, "behav/orchestrator_subtasks")
    assert "No run of this experiment logged orchestrator subtasks" in str(empty[0].layout)
    assert matrix.sync_url(7, "behaviour", AGREE, "peak") == (
        "?experiment=7&colour=behaviour&metric=behav/voter_agreement&at=peak"
    )
    assert matrix.sync_url(7, "gain", AGREE, "peak") == "?experiment=7"
    # The layout puts the choice next to the existing colour switch, with the scale explained.
    page = str(matrix.layout(experiment=str(experiment.id), colour="behaviour", metric=AGREE))
    assert "matrix-behaviour" in page and "fixed 0–1 scale" in page


def test_the_colour_bar_title_fits_beside_a_one_row_grid():
    # The title reads sideways along a 228 px grid and was cut off.
    title = "evaluator accepts wrong, final value (mean over seeds)"
    lines = figures.colour_bar_lines(title, 228)
    assert " ".join(lines) == title and len(lines) > 1
    assert all(7 * len(line) <= 228 - 110 for line in lines)
    assert figures.colour_bar_lines("gain", 500) == ["gain"]
