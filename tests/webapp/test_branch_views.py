"""The branch form on the run page and at /runs/<id>/branch/, and the run page's lineage:
who may branch, what is queued, and errors shown beside their fields instead of a 500."""

import pytest

from tests.branches import give_checkpoints
from tests.people import make_experiment
from webapp.experiments.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"


@pytest.fixture
def parent(alice, tmp_path):
    run = make_experiment(alice, workflow="voting").runs.get()
    return give_checkpoints(run, tmp_path / "runs" / str(run.id))


def form(**values):
    data = {
        "checkpoint": "best-000002",
        "control": "on",
        "kl_role": "",
        "kl_value": "",
        "coherence_lambda": "",
        "lr_factor": "",
    }
    data.update(values)
    return {k: v for k, v in data.items() if v is not None}


def test_an_outsider_is_sent_to_sign_in(client, parent):
    assert client.get(f"/runs/{parent.id}/branch/").status_code == 302
    assert client.post(f"/runs/{parent.id}/branch/", form()).status_code == 302
    assert not Run.objects.filter(parent=parent).exists()


def test_the_teammate_may_not_branch_alices_run(client, parent, bob):
    client.force_login(bob)

    assert client.get(f"/runs/{parent.id}/branch/").status_code == 403
    assert client.post(f"/runs/{parent.id}/branch/", form()).status_code == 403
    html = client.get(f"/runs/{parent.id}/").content.decode()
    assert 'id="branch-form"' not in html and 'id="lineage"' not in html
    assert not Run.objects.filter(parent=parent).exists()


def test_the_owner_sees_the_form_with_the_peak_chosen_and_why_sharing_is_missing(
    client, parent, alice
):
    client.force_login(alice)

    html = client.get(f"/runs/{parent.id}/").content.decode()

    assert 'id="branch-form"' in html and f'action="/runs/{parent.id}/branch/"' in html
    assert "step 2 · peak, accuracy 0.500" in html and "step 6, accuracy 0.250" in html
    assert 'value="best-000002" id="id_checkpoint_0" required checked' in html
    assert '<option value="generator">generator (now 0)</option>' in html  # voting's roles
    assert '<option value="aggregator">' in html
    assert 'id="id_control" checked' in html  # the control continuation is on by default
    assert "Sharing mode is not offered" in html


def test_the_owner_queues_a_control_and_a_change_and_sees_them_listed(client, parent, alice):
    client.force_login(alice)

    response = client.post(f"/runs/{parent.id}/branch/", form(lr_factor="0.1"))

    assert response.status_code == 302 and response["Location"] == f"/runs/{parent.id}/"
    control, cut = Run.objects.filter(parent=parent).order_by("id")
    assert (control.intervention, cut.intervention) == ({}, {"lr": 0.0003})
    assert control.branch_step == cut.branch_step == 2
    assert "best-000002" in cut.config["init_from"]
    html = client.get(response["Location"]).content.decode()
    assert f"Queued 2 branches from step 2: runs #{control.id}, #{cut.id}." in html
    assert f'<a href="/runs/{cut.id}/">run #{cut.id}</a></td><td>lr 0.003 → 0.0003</td>' in html
    assert f'href="/dash/compare?run={parent.id}&amp;lineage=1&amp;key=eval/accuracy"' in html


def test_a_per_role_kl_anchor_changes_that_roles_anchor(client, parent, alice):
    client.force_login(alice)

    client.post(
        f"/runs/{parent.id}/branch/",
        form(checkpoint="step-000004", control=None, kl_role="generator", kl_value="0.05"),
    )

    (child,) = Run.objects.filter(parent=parent)
    assert child.intervention == {"kl_beta_per_role": {"generator": 0.05}}
    assert child.config["kl_beta_per_role"] == {"generator": 0.05} and child.branch_step == 4


def test_the_branch_page_shows_where_it_came_from(client, parent, bob):
    client.force_login(bob)
    child = make_experiment(parent.experiment.owner).runs.get()
    Run.objects.filter(id=child.id).update(
        parent=parent, branch_step=2, intervention={"coherence_lambda": 0.5}
    )

    html = client.get(f"/runs/{child.id}/").content.decode()

    assert "data-lineage" in html
    assert f'Branched from <a href="/runs/{parent.id}/">run #{parent.id}</a> at step ' in html
    assert "<strong data-intervention>coherence λ 0 → 0.5</strong>" in html


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"lr_factor": "2"}, "lr_factor", "is not a cut"),
        ({"lr_factor": "fast"}, "lr_factor", "&#x27;fast&#x27; is not a number"),
        ({"kl_value": "-1"}, "kl_value", "kl_beta: -1.0 must be at least 0.0"),
        ({"coherence_lambda": "0"}, "coherence_lambda", "already 0: that changes nothing"),
        ({"control": None}, "control", "nothing to queue"),
        ({"checkpoint": "step-000099"}, "checkpoint", "Select a valid choice"),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_queues_nothing(
    client, parent, alice, values, field, message
):
    client.force_login(alice)

    response = client.post(f"/runs/{parent.id}/branch/", form(**values))

    assert response.status_code == 200
    html = response.content.decode()
    if field == "checkpoint":
        box = html.split('<fieldset class="axis has-error">')[1].split("</fieldset>")[0]
    elif field:
        box = next(p for p in html.split('<div class="field') if f'for="id_{field}"' in p)
        assert box.startswith(" has-error")
    else:
        box = html.split('<div class="error-box">')[1].split("</div>")[0]
    assert message in box
    assert not Run.objects.filter(parent=parent).exists()


def test_a_run_without_checkpoints_says_so_to_its_owner(client, run, alice):
    client.force_login(alice)
    Run.objects.filter(id=run.id).update(checkpoint_dir="/nonexistent/run")

    html = client.get(f"/runs/{run.id}/").content.decode()

    assert "data-no-checkpoint" in html and 'id="branch-form"' not in html


def test_an_external_run_has_no_branch_panel(client, run, alice):
    client.force_login(alice)
    Run.objects.filter(id=run.id).update(external=True)

    assert 'id="lineage"' not in client.get(f"/runs/{run.id}/").content.decode()
    response = client.get(f"/runs/{run.id}/branch/")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"


def test_staff_may_branch_alices_run(client, parent, carol):
    client.force_login(carol)

    assert client.post(f"/runs/{parent.id}/branch/", form()).status_code == 302
    assert Run.objects.filter(parent=parent).count() == 1
