"""The matrix and gradient views of an experiment whose runs have logged nothing yet: a
figure that says so (not heatmaps and log axes of gaps, which draw NaN paths) and no
findings that read "0 of 1" as if something had been measured."""

import pytest

from tests.people import make_experiment
from webapp.dashboards import data
from webapp.dashboards.pages import gradients, matrix

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
