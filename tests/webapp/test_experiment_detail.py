"""The experiment page: the runs as a matrix with status and progress, key results once runs
have evaluations, links to the panel; cancel and delete for the owner and staff only."""

import pytest

from tests.people import make_experiment
from trainer.config import make_config
from webapp.experiments.models import Experiment, Run
from webapp.metrics import write_points
from webapp.runs.queueing import new_run
from webapp.runs.summaries import cell_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture
def matrix(alice) -> Experiment:
    """2 sharing modes × 2 seeds; the first run has evaluations."""
    experiment = make_experiment(alice, name="Sharing", runs=2, sharing="shared")
    for seed in (0, 1):
        new_run(experiment, make_config("cpu-demo", seed=seed, sharing="per_role")).save()
    first = experiment.runs.order_by("id").first()
    Run.objects.filter(id=first.id).update(status=Run.SUCCEEDED, step=30)
    accuracy = [0.2, 0.3, 0.5, 0.45, 0.4]
    write_points(first.id, [("eval/accuracy", 5 * i, a) for i, a in enumerate(accuracy)])
    return experiment


def test_an_outsider_is_sent_to_sign_in(client, matrix):
    assert client.get(f"/experiments/{matrix.id}/").status_code == 302


def test_the_teammate_sees_the_matrix_with_statuses_and_progress(client, matrix, bob):
    client.force_login(bob)

    html = client.get(f"/experiments/{matrix.id}/").content.decode()

    assert "<h1>Sharing</h1>" in html
    assert html.count('class="run-cell"') == 4
    assert "seed 0" in html and "seed 1" in html
    assert html.count("badge status-queued") >= 3 and "badge status-succeeded" in html
    assert 'style="width: 100%"' in html  # the succeeded run's bar


def test_key_results_appear_once_a_run_has_evaluations(client, matrix, bob):
    client.force_login(bob)

    html = client.get(f"/experiments/{matrix.id}/").content.decode()

    # base 0.2, peak 0.5 at step 10, final = mean of the last three = 0.45
    assert ">0.200<" in html and "0.500" in html and "@10" in html and ">0.450<" in html


def test_it_links_to_the_panel(client, matrix, bob):
    client.force_login(bob)
    ids = ",".join(str(i) for i in matrix.runs.order_by("seed", "id").values_list("id", flat=True))

    html = client.get(f"/experiments/{matrix.id}/").content.decode()

    assert f'href="/dash/matrix?experiment={matrix.id}"' in html
    assert f'href="/dash/compare?runs={ids}&amp;key=eval/accuracy"' in html
    assert 'href="/dash/gradients?runs=' in html


def test_the_teammate_gets_no_actions_and_may_not_post_them(client, matrix, bob):
    client.force_login(bob)

    html = client.get(f"/experiments/{matrix.id}/").content.decode()
    assert "/cancel/" not in html and "/delete/" not in html

    assert client.post(f"/experiments/{matrix.id}/cancel/").status_code == 403
    assert client.post(f"/experiments/{matrix.id}/delete/").status_code == 403
    assert matrix.runs.filter(status=Run.QUEUED).count() == 3


def test_the_owner_cancels_every_active_run(client, matrix, alice):
    client.force_login(alice)

    response = client.post(f"/experiments/{matrix.id}/cancel/", follow=True)

    assert "Cancelling 3 runs" in response.content.decode()
    assert sorted(matrix.runs.values_list("status", flat=True)) == ["cancelled"] * 3 + ["succeeded"]


def test_staff_deletes_an_experiment(client, matrix, carol):
    client.force_login(carol)

    response = client.post(f"/experiments/{matrix.id}/delete/")

    assert response["Location"] == "/experiments/"
    assert not Experiment.objects.filter(id=matrix.id).exists()


def test_an_experiment_with_a_running_run_is_not_deleted(client, matrix, alice):
    matrix.runs.filter(status=Run.QUEUED).update(status=Run.RUNNING)
    client.force_login(alice)

    client.post(f"/experiments/{matrix.id}/delete/")

    assert Experiment.objects.filter(id=matrix.id).exists()


def test_actions_need_a_post(client, matrix, alice):
    client.force_login(alice)

    assert client.get(f"/experiments/{matrix.id}/cancel/").status_code == 405


def test_live_json_reports_each_runs_status_and_progress(client, matrix, bob):
    client.force_login(bob)

    runs = client.get(f"/experiments/{matrix.id}/live.json").json()["runs"]

    assert len(runs) == 4
    assert {(r["status"], r["percent"]) for r in runs} == {("succeeded", 100), ("queued", 0)}


def test_an_unknown_experiment_is_a_404_page(client, bob):
    client.force_login(bob)

    response = client.get("/experiments/424242/")

    assert response.status_code == 404
    assert "There is no experiment 424242." in response.content.decode()


def test_an_unknown_address_says_so_in_words_not_an_exception_name(client, bob):
    client.force_login(bob)

    response = client.get("/no-such-page/")

    assert response.status_code == 404
    html = response.content.decode()
    assert "There is nothing at this address." in html and "Resolver404" not in html


def test_an_experiment_without_runs_renders(client, alice):
    empty = Experiment.objects.create(owner=alice, name="Empty")
    client.force_login(alice)

    assert client.get(f"/experiments/{empty.id}/").status_code == 200


def test_branches_are_not_seeds_of_the_matrix_but_shown_under_their_parent(client, matrix, bob):
    root = matrix.runs.order_by("id").first()
    for step, accuracy in ((10, 0.9), (15, 0.8)):  # two branch points of seed 0
        branch = new_run(matrix, make_config("cpu-demo", seed=0, sharing="shared"))
        branch.parent, branch.branch_step, branch.intervention = root, step, {}
        branch.status = Run.SUCCEEDED
        branch.save()
        write_points(branch.id, [("eval/accuracy", s, accuracy) for s in range(step, 35, 5)])
    client.force_login(bob)

    shared = next(c for c in cell_summaries(matrix, gradients=False) if c.sharing == "shared")
    assert shared.n_seeds == 2 and shared.base == pytest.approx(0.2)
    assert shared.n_judged <= 1  # the root's verdict only; seed 1 has no evaluations
    html = client.get(f"/experiments/{matrix.id}/").content.decode()
    assert html.count('class="run-cell"') == 4  # the branches get no matrix cells of their own
    assert "+2 branches" in html
    assert html.count(f'data-branch-of="{root.id}"') == 2


def test_live_json_carries_a_running_runs_key_results_as_its_run_page_says_them(
    client, matrix, bob
):
    # Once the experiment page showed FINAL 0.128 for minutes while the run page, which
    # reads the points afresh, said 0.091. live.json now carries the running run's results.
    run = matrix.runs.filter(status=Run.QUEUED).order_by("id").first()
    Run.objects.filter(id=run.id).update(status=Run.RUNNING)
    write_points(run.id, [("eval/accuracy", 5 * i, a) for i, a in enumerate([0.1, 0.2, 0.15])])
    client.force_login(bob)

    first = {r["id"]: r for r in client.get(f"/experiments/{matrix.id}/live.json").json()["runs"]}
    write_points(run.id, [("eval/accuracy", 15, 0.05)])
    later = {r["id"]: r for r in client.get(f"/experiments/{matrix.id}/live.json").json()["runs"]}

    assert first[run.id]["results"]["final"] == pytest.approx(0.15)
    assert later[run.id]["results"]["final"] == pytest.approx((0.2 + 0.15 + 0.05) / 3)
    # The same words as the run page's key results.
    label = later[run.id]["results"]["cliff_label"]
    assert label in client.get(f"/runs/{run.id}/").content.decode()
    assert all("results" not in r for r in later.values() if r["status"] != "running")
