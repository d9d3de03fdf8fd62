"""Batched multi-agent rollouts: run every episode of a step in lockstep, one call per policy.

Each (problem, sample) runs its workflow coroutine. At every stage the driver gathers all
pending turn requests across the whole group of rollouts, groups them by the policy their
agent routes to, and generates each group in ONE batched call (8 problems × 8 samples × 3
voters = 192 sequences at once), or in calls of at most `rollout_batch` sequences. Then every
episode is scored with one batched verifier call, and per-role scores (a voter's own answer,
an evaluator's verdict) are attached to turns.

`batched=False` generates one request at a time; it exists only so `bench/rollout.py` can
measure what batching buys.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from trainer.config import Config
from trainer.episode import Episode, Turn
from trainer.routing import agent_policy
from trainer.sampling import generate, row_seed
from trainer.tasks.base import Problem, Task
from trainer.workflows import Context, Outcome, Request, runner
from trainer.workflows.prompts import ChatPrompts, TinyPrompts


@dataclass
class Codec:
    """Text <-> token ids for one tokenizer, and the ids that end or pad a sequence."""

    tokenizer: object
    add_bos: bool  # tiny models are trained with a BOS token; chat templates carry their own

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    @property
    def eos_ids(self) -> list[int]:
        tok = self.tokenizer
        ids = {tok.eos_token_id}
        for extra in ("<|im_end|>", "<|endoftext|>"):
            tid = tok.convert_tokens_to_ids(extra)
            if isinstance(tid, int) and tid != tok.unk_token_id and tid is not None:
                ids.add(tid)
        return sorted(i for i in ids if i is not None)

    def encode(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return [self.tokenizer.bos_token_id, *ids] if self.add_bos else ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


class FrozenPolicies:
    """Every policy is the same model (the base model): for evaluation and benchmarks."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[torch.nn.Module]:
        self.model.eval()
        yield self.model


def make_prompts(config: Config, tokenizer, family: str) -> TinyPrompts | ChatPrompts:
    return TinyPrompts(config.task) if family == "tiny" else ChatPrompts(config.task, tokenizer)


@dataclass
class RolloutStats:
    generate_calls: int = 0
    sequences: int = 0
    tokens: int = 0  # completion tokens generated
    seconds_generate: float = 0.0
    seconds_score: float = 0.0
    malformed: dict[str, int] = field(default_factory=dict)


def rollout(
    problems: list[Problem],
    samples: int,
    *,
    config: Config,
    policies,
    codec: Codec,
    prompts: TinyPrompts | ChatPrompts,
    task: Task,
    temperature: float,
    seed_parts: tuple = (),
    batched: bool = True,
) -> tuple[list[Episode], RolloutStats]:
    """Roll out `samples` episodes per problem; returns them scored, with stats."""
    ctx = Context(config=config, prompts=prompts, task_name=task.name)
    run = runner(config.workflow)
    episodes = [Episode(problem_id=p.id, sample=s) for p in problems for s in range(samples)]
    owners = [p for p in problems for _ in range(samples)]
    coroutines = [run(p, ctx) for p in owners]
    outcomes: list[Outcome | None] = [None] * len(episodes)
    stats = RolloutStats()

    pending: dict[int, list[Request]] = {}
    for i, co in enumerate(coroutines):
        pending[i] = next(co)
    stage = 0
    while pending:
        _generate_stage(
            pending,
            episodes,
            stage,
            config,
            policies,
            codec,
            temperature,
            seed_parts,
            batched,
            stats,
        )
        advanced: dict[int, list[Request]] = {}
        for i, requests in pending.items():
            episodes[i].turns.extend(r.turn for r in requests)
            try:
                advanced[i] = coroutines[i].send(requests)
            except StopIteration as stop:
                outcomes[i] = stop.value
        pending = advanced
        stage += 1

    started = time.perf_counter()
    _score(episodes, owners, outcomes, task)
    stats.seconds_score = time.perf_counter() - started
    for ep in episodes:
        for kind, n in ep.malformed.items():
            stats.malformed[kind] = stats.malformed.get(kind, 0) + n
    return episodes, stats


def _generate_stage(
    pending, episodes, stage, config, policies, codec, temperature, seed_parts, batched, stats
) -> None:
    by_policy: dict[str, list[tuple[int, Request]]] = defaultdict(list)
    for i, requests in pending.items():
        for request in requests:
            by_policy[agent_policy(config, request.agent, request.role)].append((i, request))
    for policy, items in by_policy.items():
        prompt_ids = [codec.encode(r.prompt) for _, r in items]
        seeds = [
            row_seed(*seed_parts, episodes[i].problem_id, episodes[i].sample, r.agent, stage)
            for i, r in items
        ]
        budgets = [r.max_new_tokens for _, r in items]
        started = time.perf_counter()
        with policies.use(policy) as model:
            # Rows are independent (per-row seeds, left padding, own budgets): a chunk of
            # `rollout_batch` rows samples what the whole call would, with a smaller KV cache.
            size = (config.rollout_batch or len(items)) if batched else 1
            chunks = [
                (prompt_ids[k : k + size], seeds[k : k + size], budgets[k : k + size])
                for k in range(0, len(items), size)
            ]
            results = []
            for ids, sd, bd in chunks:
                results += generate(
                    model,
                    ids,
                    seeds=sd,
                    max_new_tokens=bd,
                    temperature=temperature,
                    eos_ids=codec.eos_ids,
                    pad_id=codec.pad_id,
                )
                stats.generate_calls += 1
        stats.seconds_generate += time.perf_counter() - started
        for (i, request), sample in zip(items, results):
            request.text = codec.decode(sample.completion_ids)
            request.turn = Turn(
                role=request.role,
                agent=request.agent,
                policy=policy,
                stage=stage,
                prompt_ids=sample.prompt_ids,
                completion_ids=sample.completion_ids,
                logprobs=sample.logprobs,
                text=request.text,
                truncated=sample.truncated,
            )
            stats.sequences += 1
            stats.tokens += len(sample.completion_ids)


def _score(
    episodes: list[Episode], owners: list[Problem], outcomes: list[Outcome | None], task: Task
) -> None:
    """One batched verifier call over every distinct (problem, candidate) of the step."""
    wanted: dict[tuple[str, str], int] = {}
    jobs: list[tuple[Problem, str]] = []

    def need(problem: Problem, text: str) -> None:
        key = (problem.id, text)
        if key not in wanted:
            wanted[key] = len(jobs)
            jobs.append((problem, text))

    for problem, outcome in zip(owners, outcomes):
        if outcome.final is not None:
            need(problem, outcome.final)
        for judgement in outcome.judgements:
            need(problem, judgement.candidate)
    scores = task.score_many([p for p, _ in jobs], [t for _, t in jobs]) if jobs else []

    for ep, problem, outcome in zip(episodes, owners, outcomes):
        correct = lambda text: scores[wanted[(problem.id, text)]]  # noqa: E731
        ep.answer = outcome.final
        ep.reward = correct(outcome.final) if outcome.final is not None else 0.0
        ep.malformed = dict(outcome.malformed)
        for judgement in outcome.judgements:
            good = correct(judgement.candidate) > 0.5
            if judgement.kind == "answer":
                judgement.turn.score = float(good)
            else:  # a verdict is right when it accepts a correct and rejects a wrong candidate
                judgement.turn.score = float(judgement.accepted == good)
