"""Mix-and-match evaluation: a workflow evaluated with each role's weights from its own source.

Each role plays with the policy its agents used in the checkpoint it comes from
(`trainer/role_sources.py`: base, best, latest, step-N, another run's checkpoint). Under
`per_role`/`per_agent` that swaps a role's policies; under `shared` it routes one role's
turns to another checkpoint of the same policy. Everything else is the run's own evaluation
(`trainer/evaluate.py`): the same held-out problems, samples, temperature and row seeds, so
two mix-and-match evaluations, and the run's own evaluations, are paired problem by problem.

One base model carries one policy slot (a LoRA adapter, or a full copy) per distinct
(source checkpoint, policy in it) that any planned evaluation needs; an evaluation only
routes each agent to its slot. So an attribution's 2^R evaluations load the model and each
checkpoint once. A base slot is an adapter left at its initial, zero update (LoRA) or the
loaded model itself (full): exactly the base model. Slots keep the run's grouping of agents
into generation batches (one slot per policy of the source), so a role swapped between two
identical sets of weights samples identical tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from trainer.config import Config
from trainer.evaluate import evaluate, held_out
from trainer.models import load_model, resolve_device
from trainer.policies import PolicySet
from trainer.role_sources import RoleSource
from trainer.rollout import Codec, make_prompts
from trainer.routing import agent_policy, role_of, workflow_agents
from trainer.safe_load import load_state
from trainer.tasks import load_task

Sources = Mapping[str, RoleSource]  # role -> where its weights come from


def _slot_key(config: Config, sources: Sources, agent: str) -> tuple[str, str]:
    """(source, the source's policy) that plays `agent`: the policy its own run routed it to
    (a base slot follows this run's routing, so its batches are the run's own)."""
    role = role_of(agent)
    source = sources[role]
    routed_by = source.config if source.path is not None else config
    return source.key, agent_policy(routed_by, agent, role)


class MixedEvaluator:
    """Evaluate `config`'s workflow under any of the `plans` (each {role: RoleSource})."""

    def __init__(self, config: Config, plans: Sequence[Sources], device: str | None = None):
        self.config = config
        self.agents = workflow_agents(config)
        keys: list[tuple[str, str]] = []
        by_key: dict[str, RoleSource] = {}
        for sources in plans:
            for agent in self.agents:
                key = _slot_key(config, sources, agent)
                by_key[key[0]] = sources[role_of(agent)]
                if key not in keys:
                    keys.append(key)
        self.slots = {key: f"s{i}" for i, key in enumerate(keys)}
        torch.manual_seed(config.seed)  # LoRA's initial A matrices (B is zero: no effect)
        loaded = load_model(config.model, resolve_device(device or config.device))
        self.task = load_task(config.task, config.dataset)
        self.env = dict(
            codec=Codec(loaded.tokenizer, add_bos=loaded.family == "tiny"),
            prompts=make_prompts(config, loaded.tokenizer, loaded.family),
            task=self.task,
        )
        self.policies = PolicySet(loaded.model, config, list(self.slots.values()))
        states: dict[str, dict] = {}
        for (source_key, policy), slot in self.slots.items():
            source = by_key[source_key]
            if source.path is None:
                continue  # the base model: the slot as built
            if source_key not in states:
                states[source_key] = _policies_state(source.path)
            weights = states[source_key]["weights"]
            if policy not in weights:
                raise ValueError(
                    f"{source.spec}: the checkpoint holds no policy {policy!r} "
                    f"(it holds {', '.join(weights)})"
                )
            self.policies.load_policy_weights(slot, weights[policy], saved_as=policy)

    def evaluate(self, sources: Sources, problems: int | None = None) -> dict:
        """The evaluation of `trainer/evaluate.py` with each role from `sources`, plus
        "sources": {role: {"spec", "step"}}."""
        slot_of = {a: self.slots[_slot_key(self.config, sources, a)] for a in self.agents}
        result = evaluate(
            self.config,
            policies=self.policies,
            problems=held_out(self.task, problems or self.config.eval_problems),
            route=lambda agent, role: slot_of[agent],
            **self.env,
        )
        result["sources"] = {
            role: {"spec": sources[role].spec, "step": sources[role].step}
            for role in self.config.roles
        }
        return result


def _policies_state(path: Path) -> dict:
    policies = load_state(path)["policies"]
    if "shards" in policies:
        raise ValueError(
            f"{path} is a sharded checkpoint (full fine-tuning over several ranks); "
            "mix-and-match evaluation reads whole weights only"
        )
    return policies


def mixed_evaluate(config: Config, sources: Sources, problems: int | None = None) -> dict:
    """One evaluation with each role from `sources` (what `python -m trainer eval
    --role-checkpoint` prints)."""
    return MixedEvaluator(config, [sources]).evaluate(sources, problems)
