"""Workflows as data and the routing from agents to policies (docs/design.md §4). Standard library
only: the web process reads it through `trainer.config`.

`WORKFLOW_TABLE` is the one place a workflow's shape is written down: its roles (in the order
their turns first appear), the module whose `run` coroutine plays it, its title, and which
roles act as several parallel agents (and which config field says how many). The config's
choices, the roles a per-role setting may name, the agents of a run, its policies, the demo
data and the pages' workflow names all derive from it.

An agent is one instance of a role: a role in `parallel` has agents `<role>0…<role>{n-1}`,
any other role one agent named after it. `SHARING_ROUTES` says which policy an agent's turns
use under each `sharing` mode: `shared` → one policy called "shared"; `per_role` → one per
role, named after it; `per_agent` → one per agent, named after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocabulary.names import PER_AGENT, PER_ROLE, SHARED


@dataclass(frozen=True)
class Workflow:
    roles: tuple[str, ...]  # in the order their turns first appear
    module: str  # the module whose `run(problem, ctx)` coroutine plays one episode
    title: str  # how pages and figures name it
    parallel: dict[str, str] = field(default_factory=dict)  # role -> config field: how many

    def agents(self, config: Any) -> list[str]:
        """Every agent, in the order they first act (`config` supplies the parallel counts)."""
        names: list[str] = []
        for role in self.roles:
            if role in self.parallel:
                names += [f"{role}{i}" for i in range(int(getattr(config, self.parallel[role])))]
            else:
                names.append(role)
        return names


WORKFLOW_TABLE: dict[str, Workflow] = {
    # the single-agent baseline every workflow is compared with
    "single": Workflow(roles=("solver",), module="trainer.workflows.single", title="Single agent"),
    # n_voters generators answer in parallel, an aggregator decides
    "voting": Workflow(
        roles=("generator", "aggregator"),
        module="trainer.workflows.voting",
        title="Voting",
        parallel={"generator": "n_voters"},
    ),
    # a generator proposes, an evaluator accepts or sends it back (max_rounds)
    "eval_opt": Workflow(
        roles=("generator", "evaluator"), module="trainer.workflows.eval_opt", title="Eval-Opt"
    ),
    # an orchestrator plans, workers solve the parts in parallel, a synthesizer composes
    "orch_workers": Workflow(
        roles=("orchestrator", "worker", "synthesizer"),
        module="trainer.workflows.orch_workers",
        title="Orch-Workers",
        parallel={"worker": "max_subtasks"},
    ),
}

SHARING_ROUTES: dict[str, Callable[[str, str], str]] = {
    # sharing mode -> (agent, role) -> the policy that generates the agent's turns
    SHARED: lambda agent, role: SHARED,
    PER_ROLE: lambda agent, role: role,
    PER_AGENT: lambda agent, role: agent,
}

WORKFLOWS = tuple(WORKFLOW_TABLE)
SHARING = tuple(SHARING_ROUTES)
WORKFLOW_ROLES = {name: spec.roles for name, spec in WORKFLOW_TABLE.items()}


def workflow_agents(config: Any) -> list[str]:
    """The agents of `config.workflow`, in the order they first act."""
    if config.workflow not in WORKFLOW_TABLE:
        raise ValueError(f"unknown workflow {config.workflow!r}")
    return WORKFLOW_TABLE[config.workflow].agents(config)


def role_of(agent: str) -> str:
    """The role an agent instantiates: its name without the trailing instance number."""
    return re.sub(r"\d+$", "", agent)


def agent_policy(config: Any, agent: str, role: str) -> str:
    """The policy whose weights generate `agent`'s turns under `config.sharing`."""
    if config.sharing not in SHARING_ROUTES:
        raise ValueError(f"unknown sharing mode {config.sharing!r}")
    return SHARING_ROUTES[config.sharing](agent, role)


def policy_names(config: Any, agents: Sequence[str] | None = None) -> list[str]:
    """Every policy of a run, in a stable order (roles/agents in workflow order).

    `agents` defaults to `workflow_agents(config)`; pass the workflow's own list when it differs.
    """
    agents = list(agents) if agents is not None else workflow_agents(config)
    names: list[str] = []
    for agent in agents:
        name = agent_policy(config, agent, role_of(agent))
        if name not in names:
            names.append(name)
    return names
