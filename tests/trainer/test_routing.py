"""trainer.routing: the workflow table everything else derives from, without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainer.config import WORKFLOW_ROLES, WORKFLOWS, ConfigError, make_config
from trainer.routing import WORKFLOW_TABLE, role_of, workflow_agents
from trainer.workflows import runner


def test_every_workflow_in_the_table_is_playable_and_its_agents_are_of_its_roles():
    assert WORKFLOWS == tuple(WORKFLOW_TABLE)
    for name, spec in WORKFLOW_TABLE.items():
        assert WORKFLOW_ROLES[name] == spec.roles
        assert callable(runner(name))
        agents = workflow_agents(make_config(workflow=name, n_voters=2, max_subtasks=2))
        assert [r for r in dict.fromkeys(map(role_of, agents))] == list(spec.roles)
        for role, knob in spec.parallel.items():
            assert [a for a in agents if role_of(a) == role] == [f"{role}0", f"{role}1"], knob


def test_a_per_role_setting_may_name_only_the_workflows_roles():
    make_config(workflow="eval_opt", kl_beta_per_role="evaluator=0.1")
    with pytest.raises(ConfigError) as err:
        make_config(workflow="eval_opt", kl_beta_per_role="aggregator=0.1")
    assert "its roles are generator, evaluator" in err.value.errors["kl_beta_per_role"]


def test_the_config_and_the_routing_import_without_torch():
    code = "import sys, trainer.config, trainer.routing; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
