"""Attribution across the matrix (webapp/attribution/matrix.py) and the panel's attribution
page: each cell's roles with their share of the gain beside their share of the gradient."""

import pytest

from tests.people import make_experiment
from vocabulary.names import role_key
from webapp.attribution.matrix import attribution_cells, gradient_mass
from webapp.attribution.models import SwapJob
from webapp.dashboards import data
from webapp.dashboards.pages import attribution as page
from webapp.metrics import write_points

pytestmark = pytest.mark.django_db


def result(generator: float, aggregator: float) -> dict:
    def share(v):
        return {"value": v, "low": v, "high": v}

    return {
        "roles": ["generator", "aggregator"],
        "change": share(generator + aggregator),
        "shares": {"generator": share(generator), "aggregator": share(aggregator)},
        "interaction": share(0.0),
    }


@pytest.fixture
def experiment(alice):
    experiment = make_experiment(alice, runs=2, workflow="voting", sharing="per_role")
    first, second = experiment.runs.order_by("id")
    SwapJob.objects.create(run=first, kind="gain", status="succeeded", result=result(0.3, 0.1))
    SwapJob.objects.create(run=second, kind="gain", status="succeeded", result=result(0.1, 0.1))
    SwapJob.objects.create(run=second, kind="gain", status="failed", result=None)
    for run in (first, second):  # the generator puts 3 times the aggregator's norm
        write_points(run.id, [(role_key("generator", "grad_norm"), s, 3.0) for s in (1, 2)])
        write_points(run.id, [(role_key("aggregator", "grad_norm"), s, 1.0) for s in (1, 2)])
    return experiment


def test_a_cell_gives_each_roles_share_of_the_gain_beside_its_share_of_the_gradient(experiment):
    rows = {row["role"]: row for row in attribution_cells(list(experiment.runs.all()))}
    # fractions of the change: 0.75 and 0.5 for the generator, mean 0.625
    assert rows["generator"]["fraction"] == pytest.approx(0.625)
    assert rows["aggregator"]["fraction"] == pytest.approx(0.375)
    assert rows["generator"]["share"] == pytest.approx(0.2)
    assert rows["generator"]["gradient"] == pytest.approx(0.75)
    assert rows["aggregator"]["gradient"] == pytest.approx(0.25)
    assert (rows["generator"]["attributed"], rows["generator"]["runs"]) == (2, 2)


def test_a_role_that_logged_no_gradient_in_a_step_put_none_there():
    # step 1: the aggregator had no turns (or is frozen): the generator took it all
    series = {
        role_key("generator", "grad_norm"): {"steps": [1, 2], "values": [1.0, 2.0]},
        role_key("aggregator", "grad_norm"): {"steps": [2], "values": [2.0]},
    }
    assert gradient_mass(series, ["generator", "aggregator"]) == {
        "generator": 0.75,
        "aggregator": 0.25,
    }
    assert gradient_mass({}, ["generator"]) == {}


def test_the_panel_page_draws_both_shares_per_role(experiment, bob):
    with data.viewing_as(bob):
        figure, table = page.update(experiment.id)
    bars = {(t.name, t.xaxis): t.x for t in figure.data}
    assert bars[("generator", "x")] == pytest.approx((0.625,))
    assert bars[("generator", "x2")] == pytest.approx((0.75,))
    assert "2 of 2" in str(table)


def test_an_experiment_without_attributions_says_so(alice, bob):
    experiment = make_experiment(alice, workflow="voting", sharing="per_role")
    with data.viewing_as(bob):
        figure, _ = page.update(experiment.id)
    assert "No run of this experiment has an attribution yet" in str(figure.layout)


def test_a_share_whose_interval_crosses_zero_says_so_in_the_table_and_the_figure(alice, bob):
    experiment = make_experiment(alice, workflow="voting", sharing="per_role")
    run = experiment.runs.get()
    change = {"value": 0.2, "low": 0.1, "high": 0.3}
    shares = {
        "generator": {"value": 0.014, "low": -0.04, "high": 0.068},  # 7% [−20%, 34%]
        "aggregator": {"value": 0.186, "low": 0.122, "high": 0.25},  # 93% [61%, 125%]
    }
    result = {"roles": list(shares), "change": change, "shares": shares, "interaction": change}
    SwapJob.objects.create(run=run, kind="gain", status="succeeded", result=result)
    with data.viewing_as(bob):
        figure, table = page.update(experiment.id)
    text = str(table)
    assert "7% [−20%, 34%] crosses 0" in text
    assert "93% [61%, 125%]" in text and "125%] crosses" not in text
    gain = next(t for t in figure.data if t.name == "generator" and t.xaxis == "x")
    assert gain.error_x.arrayminus == pytest.approx((0.27,))
    assert gain.error_x.array == pytest.approx((0.27,))


def test_the_panel_home_and_the_matrix_link_to_the_attribution_view(experiment, bob):
    from webapp.dashboards.pages import home, matrix

    with data.viewing_as(bob):
        table, _off = home.list_experiments("/dash/", 0)
    assert f"/dash/attribution?experiment={experiment.id}" in str(table)
    assert f"/dash/attribution?experiment={experiment.id}" in str(matrix.layout(experiment.id))
