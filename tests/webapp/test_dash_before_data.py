"""The matrix and gradient views of an experiment whose runs have logged nothing yet: a
figure that says so (not heatmaps and log axes of gaps, which draw NaN paths) and no
findings that read "0 of 1" as if something had been measured."""

import pytest

from tests.people import make_experiment
from webapp.dashboards import data
from webapp.dashboards.pages import compare, gradients, matrix

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(alice, bob):
    experiment = make_experiment(alice, name="Not started", runs=1, sharing="shared")
    with data.viewing_as(bob):
        yield experiment


def _message(figure) -> str:
    return " ".join(a.text for a in figure.layout.annotations)


def test_the_matrix_says_no_evaluations_yet_instead_of_drawing_empty_cells(queued):
    figure, *_ = matrix.update_matrix(str(queued.id), "gain", 0)

    assert list(figure.data) == []
    assert "No evaluations yet" in _message(figure)


def test_the_gradient_view_draws_no_empty_axes_and_claims_no_findings(queued):
    run_ids = [run.id for run in queued.runs.all()]

    figure, _table, findings, *_ = gradients.update_gradients(run_ids, 0)

    assert list(figure.data) == [] and "No gradient points yet" in _message(figure)
    text = " ".join(item.children for item in findings)
    assert "0 of 1" not in text
    assert "No shared run has logged gradient shares yet" in text
    assert "No run has enough evaluations for a cliff verdict yet" in text


def _text(parts) -> str:
    return " ".join(str(getattr(p, "children", p)) for p in parts)


def test_a_run_id_that_is_no_run_is_named_not_dropped(queued):
    """`?runs=99999` once read as "Choose runs", as if nothing had been asked for."""
    (run_id,) = [run.id for run in queued.runs.all()]

    alone = gradients.update_gradients("99999", 0)[3]
    beside = compare.update_compare(f"{run_id},99999", "eval/accuracy", "0", "sharing", 0)[2]

    assert _text(alone) == "no run 99999 (unknown or deleted)"
    assert "1 run" in _text(beside) and "no run 99999 (unknown or deleted)" in _text(beside)
    assert "no run" not in _text(gradients.update_gradients(str(run_id), 0)[3])
