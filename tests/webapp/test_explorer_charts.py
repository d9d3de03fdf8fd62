"""The chart builder: runs grouped by any explorer field, a mean and a band over each group's
seeds (the seed-bands view's own statistics), raw points under a smoothed line, saved on an
experiment by its owner and drawn on its page."""

import json

import pytest

from tests.people import make_experiment
from vocabulary.names import ACCURACY_KEY
from webapp.explorer import charts
from webapp.explorer.fields import ExplorerError
from webapp.explorer.models import SavedChart
from webapp.metrics import write_points, write_step_times

pytestmark = pytest.mark.django_db


def _runs(alice):
    shared = make_experiment(alice, "shared", runs=2, sharing="shared", lr=1e-5)
    per_role = make_experiment(alice, "per role", runs=2, sharing="per_role", lr=1e-4)
    ids = []
    for experiment, level in ((shared, 0.3), (per_role, 0.6)):
        for i, run in enumerate(experiment.runs.order_by("id")):
            write_points(run.id, [(ACCURACY_KEY, s, level + 0.02 * i) for s in range(4)])
            ids.append(run.id)
    return shared, ids


def _means(fig):
    return {t.name: list(t.y) for t in fig.data if t.mode == "lines" and t.fill != "toself"}


def test_it_groups_runs_by_a_param_with_a_mean_over_seeds(alice):
    _, ids = _runs(alice)
    spec = charts.read_spec({"runs": ",".join(map(str, ids)), "by": "params.lr"})
    means = _means(charts.figure(spec))
    assert sorted(means) == ["params.lr = 0.0001 (2 runs)", "params.lr = 1e-05 (2 runs)"]
    assert means["params.lr = 1e-05 (2 runs)"] == pytest.approx([0.31] * 4)


def test_smoothing_keeps_the_raw_points_visible(alice):
    _, ids = _runs(alice)
    spec = charts.read_spec({"runs": ",".join(map(str, ids)), "smooth": "ema-0.3"})
    raw = [t for t in charts.figure(spec).data if t.name == "raw points"]
    assert len(raw) == 4 and sum(len(t.y) for t in raw) == 16
    off = charts.read_spec({"runs": ",".join(map(str, ids))})
    assert not [t for t in charts.figure(off).data if t.name == "raw points"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"runs": "1,x"}, "run numbers"),
        ({"runs": ""}, "Choose 1 to"),
        ({"runs": "1", "smooth": "cubic"}, "smooth must be"),
        ({"runs": "1", "by": "nothing.here"}, "Cannot search on"),
    ],
)
def test_a_bad_choice_is_named(params, message):
    with pytest.raises(ExplorerError, match=message):
        charts.read_spec(params)


def test_the_page_draws_a_log_scale_chart(client, alice):
    _, ids = _runs(alice)
    client.force_login(alice)
    response = client.get(
        "/explore/chart/",
        {"runs": ",".join(map(str, ids)), "scale": "log", "by": "attributes.sharing"},
    )
    assert response.status_code == 200
    figure = json.loads(response.context["figure"])
    assert figure["layout"]["yaxis"]["type"] == "log"


def test_the_owner_saves_a_chart_that_the_experiment_page_draws(client, alice, bob):
    experiment, ids = _runs(alice)
    query = f"runs={','.join(map(str, ids))}&by=attributes.sharing"
    client.force_login(bob)
    client.post("/explore/chart/save/", {"query": query, "experiment": experiment.id, "title": "t"})
    assert not SavedChart.objects.exists()
    client.force_login(alice)
    client.post(
        "/explore/chart/save/", {"query": query, "experiment": experiment.id, "title": "by mode"}
    )
    chart = SavedChart.objects.get()
    assert chart.owner == alice and chart.spec["by"] == "attributes.sharing"
    page = client.get(f"/experiments/{experiment.id}/").content.decode()
    assert "by mode" in page and f'id="saved-chart-{chart.id}"' in page


def test_wall_time_draws_each_timed_run_at_its_clients_times(alice):
    """MLflow-logged points carry the client's timestamp: on a wall-time axis each such run is
    a line at those instants, coloured by its group; a run without times is left out."""
    _, ids = _runs(alice)
    start = 1_700_000_000_000
    for i, run_id in enumerate(ids[:3]):
        write_step_times(run_id, {s: start + 60_000 * s + i for s in range(4)}, None)
    spec = charts.read_spec({"runs": ",".join(map(str, ids)), "x": "time"})
    fig = charts.figure(spec)
    lines = {t.meta["run"]: t for t in fig.data}
    assert sorted(lines) == sorted(ids[:3])
    first = lines[ids[0]]
    assert [x.timestamp() * 1000 for x in first.x] == [start + 60_000 * s for s in range(4)]
    assert list(first.y) == pytest.approx([0.3] * 4)
    assert fig.layout.xaxis.type == "date" and "1 run without times" in fig.layout.title.text
    # one legend entry a group, the two groups in two colours
    assert sorted(t.name for t in fig.data if t.showlegend) == [
        "sharing = per_role",
        "sharing = shared",
    ]
    assert len({t.line.color for t in fig.data}) == 2
    assert charts.panel_link(spec) is None


def test_wall_time_without_any_times_is_named(alice):
    _, ids = _runs(alice)
    spec = charts.read_spec({"runs": ",".join(map(str, ids)), "x": "time"})
    with pytest.raises(ExplorerError, match="carry a time"):
        charts.figure(spec)
    with pytest.raises(ExplorerError, match="x must be one of"):
        charts.read_spec({"runs": "1", "x": "epoch"})


def test_the_page_offers_and_keeps_the_wall_time_axis(client, alice):
    _, ids = _runs(alice)
    write_step_times(ids[0], {s: 1_700_000_000_000 + s for s in range(4)}, None)
    client.force_login(alice)
    response = client.get("/explore/chart/", {"runs": ",".join(map(str, ids)), "x": "time"})
    assert response.status_code == 200
    assert '<option value="time" selected>' in response.content.decode()
    assert json.loads(response.context["figure"])["layout"]["xaxis"]["type"] == "date"
