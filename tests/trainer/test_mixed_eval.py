"""Mix-and-match evaluation (trainer/mixed_eval.py) and frozen roles on tiny-s: a voting
per_role run whose aggregator is frozen, evaluated with each role from its own checkpoint."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from analysis.attribution import attribute
from tests.trainer import quick
from trainer.checkpoint_index import STATE_FILE, latest_step_checkpoint
from trainer.cli import main
from trainer.config import ConfigError
from trainer.evaluate import read_per_problem
from trainer.mixed_eval import MixedEvaluator
from trainer.reporting import ListReporter
from trainer.role_sources import resolve_sources
from trainer.train import train


def voting(**overrides):
    base = dict(workflow="voting", sharing="per_role", prompts_per_step=4, group_size=4)
    return quick.small(**{**base, **overrides})


@pytest.fixture(scope="module")
def frozen_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("frozen")
    config = voting(frozen_roles="aggregator")
    assert train(config, out, ListReporter())["status"] == "succeeded"
    return config, out


def _lora_b(out, policy):
    state = torch.load(latest_step_checkpoint(out).path / STATE_FILE, weights_only=True)
    weights = state["policies"]["weights"][policy]
    return [v for k, v in weights.items() if ".lora_B." in k]


def test_a_frozen_role_keeps_its_base_weights_and_the_others_train(frozen_run):
    _, out = frozen_run
    assert all(torch.count_nonzero(b) == 0 for b in _lora_b(out, "aggregator"))
    assert any(torch.count_nonzero(b) > 0 for b in _lora_b(out, "generator"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(frozen_roles="judge"), "judge not a role of voting"),
        (dict(frozen_roles="aggregator", sharing="shared"), "use per_role or per_agent"),
        (dict(frozen_roles="generator,aggregator"), "nothing would train"),
    ],
)
def test_frozen_roles_that_cannot_be_kept_are_refused(overrides, message):
    with pytest.raises(ConfigError) as err:
        voting(**overrides)
    assert message in err.value.errors["frozen_roles"]


def test_frozen_roles_are_spelled_one_way_and_hashed_only_when_set():
    assert voting(frozen_roles=" aggregator ,").frozen_roles == "aggregator"
    assert voting(frozen_roles="aggregator").hash() != voting().hash()


def test_the_corners_are_the_runs_own_evaluations_and_a_frozen_role_gets_exactly_zero(frozen_run):
    config, out = frozen_run
    roles = config.roles  # generator, aggregator
    plans = {}
    for trained in ([], ["generator"], ["aggregator"], ["generator", "aggregator"]):
        specs = {role: "latest" if role in trained else "base" for role in roles}
        plans[frozenset(trained)] = resolve_sources(specs, config, out)
    evaluator = MixedEvaluator(config, list(plans.values()))
    per_problem = {c: evaluator.evaluate(s)["per_problem"] for c, s in plans.items()}
    own = read_per_problem(out)
    # paired with the run's own evaluations: the same problems, seeds and weights
    assert per_problem[frozenset()] == own[0]
    assert per_problem[frozenset(roles)] == own[config.steps]
    result = attribute(roles, per_problem)
    assert result["shares"]["aggregator"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert result["shares"]["generator"]["value"] == pytest.approx(result["change"]["value"])


def test_the_cli_mixes_roles_and_names_what_it_cannot_find(frozen_run, capsys):
    config, out = frozen_run
    argv = ["eval", "--out", str(out), "--problems", "4"]
    assert main([*argv, "--role-checkpoint", "generator=step-2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sources"] == {
        "generator": {"spec": "step-2", "step": 2},
        "aggregator": {"spec": "base", "step": 0},
    }
    assert len(printed["per_problem"]) == 4
    assert main([*argv, "--role-checkpoint", "generator=step-1"]) == 2
    assert "generator=step-1: the run keeps no checkpoint of step 1" in capsys.readouterr().err
    assert main([*argv, "--role-checkpoint", "judge=best"]) == 2
    assert "'judge' is not a role" in capsys.readouterr().err


@pytest.mark.parametrize("sharing", ["shared", "per_agent"])
def test_every_sharing_mode_pairs_its_corners_with_the_runs_own_evaluations(sharing, tmp_path):
    config = voting(sharing=sharing, steps=2, eval_every=2, checkpoint_every=2)
    assert train(config, tmp_path, ListReporter())["status"] == "succeeded"
    plans = {
        trained: resolve_sources(
            {"generator": trained[0], "aggregator": trained[1]}, config, tmp_path
        )
        for trained in (("base", "base"), ("latest", "latest"), ("latest", "base"))
    }
    evaluator = MixedEvaluator(config, list(plans.values()))
    # under shared, a role from another checkpoint gets a slot of its own
    assert len(set(evaluator.slots.values())) == {"shared": 2, "per_agent": 8}[sharing]
    own = read_per_problem(tmp_path)
    assert evaluator.evaluate(plans["base", "base"])["per_problem"] == own[0]
    assert evaluator.evaluate(plans["latest", "latest"])["per_problem"] == own[2]


def test_another_runs_checkpoint_is_read_with_its_own_config(frozen_run, tmp_path):
    config, out = frozen_run
    path = str(latest_step_checkpoint(out).path)
    by_path = resolve_sources({"generator": path}, config, None, paths=True)["generator"]
    assert by_path.path == latest_step_checkpoint(out).path and by_path.step == config.steps
    other = voting(workflow="eval_opt")
    with pytest.raises(ValueError, match="workflow: 'eval_opt' differs from 'voting'"):
        resolve_sources({"generator": path}, other, tmp_path, paths=True)


def test_a_path_is_a_source_only_on_the_operators_command_line(frozen_run):
    config, out = frozen_run
    path = str(latest_step_checkpoint(out).path)
    with pytest.raises(ValueError, match="is not a source; use base, best, latest"):
        resolve_sources({"generator": path}, config, out, runs=out.parent)


def test_another_run_is_named_run_colon_checkpoint_under_the_runs_folder(frozen_run, tmp_path):
    config, out = frozen_run
    shutil.copytree(out, tmp_path / "41")
    found = resolve_sources({"generator": f"41:step-{config.steps}"}, config, None, runs=tmp_path)
    assert found["generator"].path == tmp_path / "41" / "checkpoints" / f"step-{config.steps:06d}"
    assert found["generator"].config == config
    with pytest.raises(FileNotFoundError, match="generator=41:step-1: run 41 keeps no checkpoint"):
        resolve_sources({"generator": "41:step-1"}, config, None, runs=tmp_path)
