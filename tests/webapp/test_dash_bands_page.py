"""The seed-bands page's callbacks on stored runs (3 seeds × 2 sharing modes whose accuracy
curves are flat at known peaks): the groups drawn, the table and its order, the URL, and the
links other views give to it."""

from types import SimpleNamespace

import pytest

from tests.stats_runs import flat, stored_run
from webapp.dashboards import components, data, state
from webapp.dashboards.pages import bands, matrix
from webapp.experiments.models import Experiment, Run

pytestmark = pytest.mark.django_db

PEAKS = {"shared": [0.5, 0.52, 0.48], "per_role": [0.7, 0.72, 0.68]}


@pytest.fixture
def study(alice, bob):
    experiment = Experiment.objects.create(owner=alice, name="Seeds", preset="cpu-demo")
    ids = [
        stored_run(experiment, seed=seed, sharing=sharing, accuracy=flat(peak)).id
        for sharing, peaks in PEAKS.items()
        for seed, peak in enumerate(peaks)
    ]
    with data.viewing_as(bob):  # any signed-in teammate may read
        yield SimpleNamespace(experiment=experiment, ids=ids)


def _means(figure):
    return {t.name: list(t.y) for t in figure.data if t.fill != "toself"}


def test_the_experiment_opens_with_all_its_runs(study):
    page = bands.layout(experiment=str(study.experiment.id))
    runs = page.children[4].children[0].children[1]  # controls → runs picker → dropdown
    assert runs.value == study.ids


def test_grouped_by_sharing_two_bands_with_the_known_means(study):
    figure, status, timer_off, links = bands.update_bands(
        study.ids, "eval/accuracy", "sharing", "0", "ci", "linear", 0
    )
    assert len([t for t in figure.data if t.fill == "toself"]) == 2
    means = _means(figure)
    # flat(p) is 0.2, (0.2 + p)/2, then p: the mean of three seeds is at their mean peak.
    assert means["sharing = per_role (3 runs)"][-1] == pytest.approx(0.7)
    assert means["sharing = shared (3 runs)"][-1] == pytest.approx(0.5)
    assert timer_off is True  # every run finished: no refresh
    assert any(getattr(link, "href", "").startswith("/dash/compare?runs=") for link in links)


def test_grouped_by_seed_three_bands_and_the_group_choices(study):
    figure = bands.update_bands(study.ids, "eval/accuracy", "seed", "0", "ci", "log", 0)[0]
    assert sorted(_means(figure)) == [f"seed = {s} (2 runs)" for s in range(3)]
    assert figure.layout.yaxis.type == "log"
    by, keys = bands.field_and_key_options(study.ids)
    values = [o["value"] for o in by]
    assert values[0] == "(cell)"  # the default: the whole matrix cell
    assert values[1:3] == ["seed", "sharing"]  # then the fields that differ
    assert values[-1] == "(all)" and "lr" in values
    assert [o["value"] for o in keys] == ["eval/accuracy"]


def test_the_table_sorts_by_a_clicked_heading(study, monkeypatch):
    table = bands.update_table(study.ids, "sharing", {"col": "peak", "desc": True}, 0)
    peaks = [row.children[-5].children for row in table.children[1].children]
    assert peaks == ["0.720", "0.700", "0.680", "0.520", "0.500", "0.480"]
    headings = table.children[0].children.children
    assert headings[1].children.children == "sharing"  # the group-by field comes first

    clicked = SimpleNamespace(
        triggered_id={"type": bands.SORT_ID, "col": "peak"}, triggered=[{"value": 1}]
    )
    monkeypatch.setattr(bands, "ctx", clicked)
    assert bands.click_sort([0, 1], {}) == {"col": "peak", "desc": False}
    assert bands.click_sort([0, 1], {"col": "peak", "desc": False}) == {"col": "peak", "desc": True}
    monkeypatch.setattr(bands, "ctx", SimpleNamespace(triggered_id=None, triggered=[]))
    assert bands.click_sort([0, 0], {"col": "peak"}) is bands.dash.no_update


def test_the_url_holds_the_controls(study):
    assert bands.sync_url([3, 7], "eval/accuracy", "(cell)", "0", "ci", "linear", {}) == (
        "?runs=3,7&key=eval/accuracy"
    )
    by_peak = {"col": "peak", "desc": True}
    assert bands.sync_url([3], "train/kl", "lr", "ema-0.1", "minmax", "log", by_peak) == (
        "?runs=3&key=train/kl&by=lr&smooth=ema-0.1&band=minmax&scale=log&sort=-peak"
    )
    assert bands.parse_sort("-peak") == {"col": "peak", "desc": True}
    assert bands.parse_sort("final") == {"col": "final", "desc": False}
    assert bands.parse_sort(None) == {}


def test_the_matrix_and_compare_views_link_to_the_bands(study):
    experiment = study.experiment.id
    assert matrix.view_hrefs(str(experiment)) == (
        f"/dash/bands?experiment={experiment}",
        f"/dash/attribution?experiment={experiment}",
    )
    runs = data.runs(data.viewer(), study.ids[:2])
    (link,) = components.bands_link(runs)
    assert link.href == state.bands_url(run_ids=study.ids[:2])
    assert components.bands_link([]) == []


def test_by_default_single_and_voting_runs_of_one_sharing_mode_make_two_bands(alice, bob):
    experiment = Experiment.objects.create(owner=alice, name="Cells", preset="cpu-demo")
    ids = [
        stored_run(
            experiment, seed=seed, sharing="shared", workflow=workflow, accuracy=flat(peak)
        ).id
        for workflow, peak in (("single", 0.3), ("voting", 0.6))
        for seed in range(2)
    ]
    with data.viewing_as(bob):
        page = bands.layout(experiment=str(experiment.id))
        by = page.children[4].children[2].children[1]  # controls → group by → dropdown
        figure = bands.update_bands(ids, "eval/accuracy", by.value, "0", "ci", "linear", 0)[0]

    means = _means(figure)
    assert sorted(means) == [
        "single · math · tiny-s · shared (2 runs)",
        "voting · math · tiny-s · shared (2 runs)",
    ]
    assert means["single · math · tiny-s · shared (2 runs)"][-1] == pytest.approx(0.3)


def test_a_branch_is_a_band_of_its_own_not_a_seed_of_its_parents_cell(study, bob):
    parent = Run.objects.get(id=study.ids[0])
    branch = stored_run(study.experiment, seed=0, sharing="shared", accuracy=flat(0.9))
    Run.objects.filter(id=branch.id).update(parent=parent, branch_step=4, intervention={})
    ids = [*study.ids, branch.id]

    figure = bands.update_bands(ids, "eval/accuracy", "(cell)", "0", "ci", "linear", 0)[0]

    means = _means(figure)
    assert means["voting · math · tiny-s · shared (3 runs)"][-1] == pytest.approx(0.5)
    branch_name = "voting · math · tiny-s · shared · branch: control (no change) (1 run)"
    assert means[branch_name][-1] == pytest.approx(0.9)


def test_the_table_names_each_branchs_parent(study, bob):
    parent = Run.objects.get(id=study.ids[0])
    branch = stored_run(study.experiment, seed=0, sharing="shared", accuracy=flat(0.9))
    Run.objects.filter(id=branch.id).update(parent=parent, branch_step=4, intervention={})

    table = bands.update_table([*study.ids, branch.id], "(cell)", {}, 0)

    headings = [th.children.children for th in table.children[0].children.children]
    assert "Branch of" in headings
    last = table.children[1].children[-1]
    assert f"#{parent.id} @4" in [td.children for td in last.children]
