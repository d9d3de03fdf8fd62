"""The multi-agent workflows: each a small coroutine; their roles and agents are data in
`trainer/routing.py` (`WORKFLOW_TABLE`).

A workflow runs one problem as a generator: it yields the list of turns it needs next (one
`Request` per agent speaking in that stage), receives them back with their completions
filled in, and finally returns an `Outcome`. The rollout driver (`trainer/rollout.py`) runs
hundreds of these coroutines in lockstep and batches every stage's requests by policy, so a
workflow never knows about batching, models or devices.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from trainer.config import Config
from trainer.episode import Turn
from trainer.routing import WORKFLOW_TABLE, role_of, workflow_agents
from trainer.tasks.base import Problem


@dataclass
class Request:
    agent: str
    role: str
    prompt: str  # text handed to the tokenizer (already chat-templated for real models)
    max_new_tokens: int
    text: str = ""  # the completion, filled in by the driver
    turn: Turn | None = None  # the recorded turn, filled in by the driver


@dataclass
class Judgement:
    """A turn whose own output can be scored once the task's verifier has run."""

    turn: Turn
    candidate: str  # the completion (or chosen candidate) to score against the problem
    kind: str  # "answer": score = correct(candidate); "verdict": score = (accepted == correct)
    accepted: bool = False


@dataclass
class Outcome:
    final: str | None  # the completion holding the final answer (math) or the program (code)
    judgements: list[Judgement] = field(default_factory=list)
    malformed: dict[str, int] = field(default_factory=dict)


WorkflowRun = Generator[list[Request], list[Request], Outcome]


@dataclass
class Context:
    """What a workflow coroutine may use: the config, the task and the prompt builder."""

    config: Config
    prompts: Prompts  # noqa: F821 - trainer.workflows.prompts.Prompts
    task_name: str


def agents(config: Config) -> list[tuple[str, str]]:
    """Every (agent, role) of the configured workflow, in turn order."""
    return [(agent, role_of(agent)) for agent in workflow_agents(config)]


def runner(workflow: str) -> Callable[[Problem, Context], WorkflowRun]:
    """The coroutine that plays `workflow` (its module is named in `WORKFLOW_TABLE`)."""
    return importlib.import_module(WORKFLOW_TABLE[workflow].module).run
