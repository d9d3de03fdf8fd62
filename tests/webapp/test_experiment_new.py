"""The new-experiment form: generated from trainer.config, validated by it, errors beside their
fields, the live run count, presets, and clones of runs and experiments."""

import re

import pytest
from django.utils.html import escape

from tests.people import make_experiment
from tests.runs import form_data
from trainer.config import field_help
from vocabulary.names import MATRIX_AXES
from webapp.experiments.models import Experiment, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, bob):
    client.force_login(bob)
    return client


def field_block(html: str, name: str) -> str:
    """The markup of one field, from its label to the end of its block."""
    start = html.index(f'for="id_{name}"')
    return html[start : html.index("</div>", start)]


def test_an_outsider_is_sent_to_sign_in(client):
    assert client.get("/experiments/new/").status_code == 302


def test_every_hyperparameter_is_a_field_with_its_default_and_help(signed_in):
    html = signed_in.get("/experiments/new/?preset=").content.decode()

    for row in field_help():
        if row["name"] in MATRIX_AXES:
            continue
        block = field_block(html, row["name"])
        assert escape(row["help"]) in block, row["name"]
        if row["name"] != "max_rounds":  # its help says the default per task
            assert "Default " in block, row["name"]
    assert 'value="0.00002"' in html or 'value="2e-05"' in html  # lr's default
    assert "default 3 math, 2 code" in html  # max_rounds depends on the task


def test_the_matrix_axes_are_checkboxes_including_the_tiny_and_qwen_models(signed_in):
    html = signed_in.get("/experiments/new/").content.decode()

    for value in (
        "single",
        "voting",
        "eval_opt",
        "orch_workers",
        "math",
        "code",
        "shared",
        "per_role",
        "per_agent",
        "tiny-s",
        "tiny-m",
        "tiny-l",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-1.7B",
        "Qwen/Qwen3-4B",
    ):
        assert re.search(rf'type="checkbox"[^>]*value="{re.escape(value)}"', html), value
    assert "experiment_form.js" in html and "data-run-count" in html


def test_the_cpu_demo_preset_fills_its_values_in(signed_in):
    html = signed_in.get("/experiments/new/?preset=cpu-demo").content.decode()

    assert 'name="preset" value="cpu-demo"' in html
    assert 'value="30"' in field_block(html, "steps")
    assert re.search(r'value="tiny-s"[^>]*checked', html)


def test_the_paper_preset_fills_its_values_in(signed_in):
    html = signed_in.get("/experiments/new/?preset=paper").content.decode()

    assert 'value="500"' in field_block(html, "steps")
    assert re.search(r'value="Qwen/Qwen3-0.6B"[^>]*checked', html)


def test_queueing_creates_the_runs_and_stores_only_the_changes(signed_in, bob):
    response = signed_in.post("/experiments/new/", form_data(steps="4", eval_every="2"))

    experiment = Experiment.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/experiments/{experiment.id}/"
    assert experiment.owner == bob and experiment.preset == "cpu-demo"
    assert experiment.base_config == {"steps": 4, "eval_every": 2}
    assert experiment.matrix == {
        "workflow": ["single", "voting"],
        "task": ["math"],
        "model": ["tiny-s"],
        "sharing": ["shared"],
        "seed": [0, 1],
    }
    assert experiment.runs.count() == 4
    assert set(experiment.runs.values_list("status", "queue")) == {(Run.QUEUED, "cpu")}
    assert "Queued 4 runs" in signed_in.get(response["Location"]).content.decode()


def test_errors_are_shown_beside_their_fields_and_nothing_is_queued(signed_in):
    response = signed_in.post("/experiments/new/", form_data(lr="-1", group_size="one"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "was not queued" in html
    assert "must be greater than 0" in field_block(html, "lr")
    assert "is not a whole number" in field_block(html, "group_size")
    assert not Experiment.objects.exists()


def test_repeated_seeds_are_named_beside_the_seeds(signed_in):
    response = signed_in.post("/experiments/new/", form_data(seeds="1,1"))

    assert "values repeat" in field_block(response.content.decode(), "seeds")
    assert not Experiment.objects.exists()


def test_a_value_not_offered_is_named_beside_its_axis(signed_in):
    response = signed_in.post("/experiments/new/", form_data(sharing=["everyone"]))

    html = response.content.decode()
    axis = html[
        html.index('data-axis="sharing"') : html.index(
            "</fieldset>", html.index('data-axis="sharing"')
        )
    ]
    assert "Select a valid choice" in axis


def test_a_matrix_over_the_limit_is_refused_at_the_top(signed_in):
    everything = form_data(
        workflow=["single", "voting", "eval_opt", "orch_workers"],
        task=["math", "code"],
        model=["tiny-s", "tiny-m", "tiny-l"],
        sharing=["shared", "per_role", "per_agent"],
        seeds=",".join(map(str, range(14))),
    )

    html = signed_in.post("/experiments/new/", everything).content.decode()

    top = html[html.index("error-box") : html.index("</div>", html.index("error-box"))]
    assert "1008 runs is more than the limit of 1000" in top


def test_an_unknown_model_is_named_beside_the_other_models_field(signed_in):
    response = signed_in.post("/experiments/new/", form_data(model=[], other_models="not a model!"))

    assert "is not a known model" in field_block(response.content.decode(), "other_models")


def test_bad_seeds_are_named_beside_the_seeds(signed_in):
    response = signed_in.post("/experiments/new/", form_data(seeds="0, one"))

    assert "write seeds like 0,1,2" in field_block(response.content.decode(), "seeds")


def test_a_name_is_required(signed_in):
    response = signed_in.post("/experiments/new/", form_data(name=""))

    assert "This field is required" in field_block(response.content.decode(), "name")


def test_a_missing_name_and_a_config_error_are_shown_in_one_submit(signed_in):
    response = signed_in.post(
        "/experiments/new/", form_data(name="", kernels="liger", device="cpu")
    )

    html = response.content.decode()
    assert "This field is required" in field_block(html, "name")
    assert "run on CUDA only" in field_block(html, "kernels")
    assert not Experiment.objects.exists()


def test_an_axis_with_nothing_checked_takes_the_presets_value(signed_in):
    signed_in.post("/experiments/new/", form_data(workflow=[], seeds=""))

    run = Run.objects.get()
    assert (run.workflow, run.seed) == ("single", 0)
    assert "workflow" not in Experiment.objects.get().matrix


def test_a_blank_max_rounds_follows_each_task(signed_in):
    signed_in.post(
        "/experiments/new/", form_data(workflow=["eval_opt"], task=["math", "code"], seeds="0")
    )

    assert dict(Run.objects.values_list("task", "config__max_rounds")) == {"math": 3, "code": 2}


def test_a_run_clones_into_a_prefilled_form(signed_in, alice):
    experiment = make_experiment(alice, steps=7, workflow="voting", sharing="per_role")
    run = experiment.runs.get()

    html = signed_in.get(f"/experiments/new/?run={run.id}").content.decode()

    assert f"(run {run.id}, edited)" in html
    assert 'value="7"' in field_block(html, "steps")
    assert re.search(r'value="voting"[^>]*checked', html)
    assert re.search(r'value="per_role"[^>]*checked', html)
    assert not re.search(r'value="single"[^>]*checked', html)


def test_an_experiment_clones_into_a_prefilled_form(signed_in, alice):
    experiment = Experiment.objects.create(
        owner=alice,
        name="Big",
        preset="cpu-demo",
        base_config={"steps": 9},
        matrix={"sharing": ["shared", "per_agent"], "seed": [3, 4]},
    )

    html = signed_in.get(f"/experiments/new/?experiment={experiment.id}").content.decode()

    assert "Big (copy)" in html
    assert 'value="9"' in field_block(html, "steps")
    assert re.search(r'value="per_agent"[^>]*checked', html)
    assert 'value="3, 4"' in html


def test_cloning_an_unknown_run_is_a_404(signed_in):
    assert signed_in.get("/experiments/new/?run=999999").status_code == 404


def test_a_local_model_path_that_does_not_exist_is_refused_beside_the_field(
    signed_in, tmp_path, settings
):
    settings.DATA_DIR = tmp_path
    missing = str(tmp_path / "models" / "no-such-model")
    response = signed_in.post("/experiments/new/", form_data(model=[], other_models=missing))

    assert "there is no directory" in field_block(response.content.decode(), "other_models")
    assert not Experiment.objects.exists()


def test_a_local_model_directory_with_a_model_is_accepted(signed_in, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    model = tmp_path / "models" / "qwen3-local"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    response = signed_in.post("/experiments/new/", form_data(model=[], other_models=str(model)))

    assert response.status_code == 302
    assert set(Run.objects.values_list("model", flat=True)) == {str(model)}


def test_a_model_outside_the_model_folder_is_refused_beside_the_field(
    signed_in, tmp_path, settings
):
    settings.DATA_DIR = tmp_path / "data"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_text("{}")
    for path in (tmp_path / "elsewhere", tmp_path / "nowhere"):  # one answer, existing or not
        response = signed_in.post("/experiments/new/", form_data(model=[], other_models=str(path)))

        block = field_block(response.content.decode(), "other_models")
        assert "is not in the server&#x27;s model folder" in block
        assert "there is no directory" not in block
    assert not Experiment.objects.exists()


def test_switching_preset_keeps_the_typed_name_and_description(signed_in):
    html = signed_in.get("/experiments/new/?preset=paper&name=My+study&description=Why").content

    html = html.decode()
    assert 'value="My study"' in field_block(html, "name")
    assert "Why</textarea>" in html
