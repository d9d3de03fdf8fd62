"""Batched multi-agent rollouts: run every episode of a step in lockstep, one call per policy.

Each (problem, sample) runs its workflow coroutine. At every stage the driver gathers all
pending turn requests across the whole group of rollouts, groups them by the policy their
agent routes to, and generates each group in ONE batched call (8 problems × 8 samples × 3
voters = 192 sequences at once), or in calls of at most `rollout_batch` sequences. Then every
episode is scored with one batched verifier call, and per-role scores (a voter's own answer,
an evaluator's verdict) are attached to turns.

Generation goes through a rollout engine (`trainer/engines`): by default the exact sampler
on `policies` (`hf`); a trainer that started another one (`vllm`) passes it as `engine`.
`batched=False` generates one request at a time; it exists only so `bench/rollout.py` can
measure what batching buys.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from trainer.config import Config
from trainer.engines.hf import HFEngine
from trainer.episode import Episode, Turn
from trainer.routing import agent_policy
from trainer.sampling import row_seed
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
    verdicts_rechecked: int = 0  # distinct passing answers checked again, independently
    verdict_disagreements: int = 0  # ... that the independent check failed


SECOND_OPINION_SAMPLE = 4  # passing answers of a rollout re-checked without the checker


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
    engine=None,
    route: Callable[[str, str], str] | None = None,
) -> tuple[list[Episode], RolloutStats]:
    """Roll out `samples` episodes per problem; returns them scored, with stats. `engine`
    generates (None: the exact sampler on `policies`, `rollout_batch` rows a call). `route`
    maps (agent, role) to the policy that generates the turn (None: `config.sharing`'s
    routing; a mix-and-match evaluation passes its own, trainer/mixed_eval.py)."""
    if route is None:
        route = lambda agent, role: agent_policy(config, agent, role)  # noqa: E731
    if engine is None or not batched:
        engine = HFEngine(policies, (config.rollout_batch or 0) if batched else 1)
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
            engine,
            codec,
            temperature,
            seed_parts,
            stats,
            route,
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
    _second_opinion(episodes, owners, task, seed_parts, stats)
    stats.seconds_score = time.perf_counter() - started
    for ep in episodes:
        for kind, n in ep.malformed.items():
            stats.malformed[kind] = stats.malformed.get(kind, 0) + n
    return episodes, stats


def _generate_stage(
    pending, episodes, stage, config, engine, codec, temperature, seed_parts, stats, route
) -> None:
    by_policy: dict[str, list[tuple[int, Request]]] = defaultdict(list)
    for i, requests in pending.items():
        for request in requests:
            by_policy[route(request.agent, request.role)].append((i, request))
    jobs = []
    for policy, items in by_policy.items():
        prompt_ids = [codec.encode(r.prompt) for _, r in items]
        seeds = [
            row_seed(*seed_parts, episodes[i].problem_id, episodes[i].sample, r.agent, stage)
            for i, r in items
        ]
        budgets = [r.max_new_tokens for _, r in items]
        jobs.append((policy, prompt_ids, seeds, budgets))
    started = time.perf_counter()
    calls = engine.calls
    # Every policy's rows at once: an engine that serves several adapters batches them.
    results = engine.generate_many(
        jobs, temperature=temperature, eos_ids=codec.eos_ids, pad_id=codec.pad_id
    )
    stats.generate_calls += engine.calls - calls
    stats.seconds_generate += time.perf_counter() - started
    for (policy, items), samples in zip(by_policy.items(), results):
        for (i, request), sample in zip(items, samples):
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


def _second_opinion(
    episodes: list[Episode], owners: list[Problem], task: Task, seed_parts: tuple, stats
) -> None:
    """Re-check a sample of the passing final answers independently of the verifier (code:
    trainer/tasks/second_opinion.py); mark those it fails and count them. The sample is a
    function of the rollout's seed, so a rerun re-checks the same episodes."""
    passing = sorted(
        {(p.id, ep.answer): p for ep, p in zip(episodes, owners) if ep.reward > 0.5}.items()
    )
    if not passing:
        return
    rng = random.Random(row_seed(*seed_parts, "second_opinion"))
    chosen = rng.sample(passing, min(SECOND_OPINION_SAMPLE, len(passing)))
    verdicts = task.second_opinion([p for _, p in chosen], [text for (_, text), _ in chosen])
    failed = set()
    for ((problem_id, text), _), verdict in zip(chosen, verdicts):
        if verdict is None:
            continue
        stats.verdicts_rechecked += 1
        if not verdict:
            failed.add((problem_id, text))
    stats.verdict_disagreements += len(failed)
    for ep in episodes:
        if (ep.problem_id, ep.answer) in failed:
            ep.verdict_disagreement = True


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
