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
from vocabulary.names import REWARD_PER_ROLE


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
    # The same per role: a role counts each re-checked answer it gave (or, for the final
    # answer, produced); per_role also re-checks intermediate agents' scored answers.
    rechecked_by_role: dict[str, int] = field(default_factory=dict)
    disagreements_by_role: dict[str, int] = field(default_factory=dict)


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
    sample = config.second_opinion_sample
    per_role = config.reward_mode == REWARD_PER_ROLE
    _second_opinion(episodes, owners, outcomes, task, seed_parts, stats, sample, per_role)
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
    episodes: list[Episode],
    owners: list[Problem],
    outcomes: list[Outcome | None],
    task: Task,
    seed_parts: tuple,
    stats: RolloutStats,
    sample: int,
    per_role: bool,
) -> None:
    """Re-check a sample of the passing answers independently of the verifier (code:
    trainer/tasks/second_opinion.py); mark those it fails and count them, in all and per
    role. Passing final answers are sampled, and under `per_role` rewards every scored
    answer of an intermediate agent too (a voter's). The sample is a function of the
    rollout's seed, so a rerun re-checks the same answers."""
    passing = _passing_answers(episodes, owners, outcomes, per_role)
    if not passing or sample <= 0:
        return
    rng = random.Random(row_seed(*seed_parts, "second_opinion"))
    chosen = rng.sample(sorted(passing), min(sample, len(passing)))
    problems = [passing[key][0] for key in chosen]
    verdicts = task.second_opinion(problems, [text for _, text in chosen])
    failed = set()
    for key, verdict in zip(chosen, verdicts):
        if verdict is None:
            continue
        stats.verdicts_rechecked += 1
        for role in passing[key][1]:
            stats.rechecked_by_role[role] = stats.rechecked_by_role.get(role, 0) + 1
            if not verdict:
                stats.disagreements_by_role[role] = stats.disagreements_by_role.get(role, 0) + 1
        if not verdict:
            failed.add(key)
    stats.verdict_disagreements += len(failed)
    for ep, outcome in zip(episodes, outcomes):
        given = {ep.answer} | {j.candidate for j in (outcome.judgements if outcome else ())}
        if any((ep.problem_id, text) in failed for text in given):
            ep.verdict_disagreement = True


def _passing_answers(episodes, owners, outcomes, per_role: bool) -> dict:
    """(problem id, answer) -> (problem, the roles that gave it) for every answer that scored
    as correct: final answers (credited to the role whose answer it was, else the last
    turn's), and under `per_role` every scored answer of an intermediate agent."""
    found: dict[tuple[str, str], tuple[Problem, set[str]]] = {}

    def add(problem: Problem, text: str, role: str) -> None:
        found.setdefault((problem.id, text), (problem, set()))[1].add(role)

    for ep, problem, outcome in zip(episodes, owners, outcomes):
        answers = [j for j in (outcome.judgements if outcome else ()) if j.kind == "answer"]
        if ep.reward > 0.5 and ep.answer is not None:
            giver = [j.turn.role for j in answers if j.candidate == ep.answer]
            add(problem, ep.answer, giver[-1] if giver else ep.turns[-1].role if ep.turns else "")
        if per_role:
            for judgement in answers:
                if (judgement.turn.score or 0.0) > 0.5:
                    add(problem, judgement.candidate, judgement.turn.role)
    return found


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
