"""Orchestrator-Workers: plan, solve the parts in parallel, synthesize.

The orchestrator splits the problem into at most `max_subtasks` subtasks; worker i solves
subtask i (all workers in one stage); the synthesizer composes the final answer from their
results. An empty plan is recorded as malformed and the synthesizer answers without results.
"""

from __future__ import annotations

from trainer.tasks.base import Problem
from trainer.workflows import Context, Judgement, Outcome, Request, WorkflowRun


def run(problem: Problem, ctx: Context) -> WorkflowRun:
    cfg, prompts = ctx.config, ctx.prompts
    (orchestrator,) = yield [
        Request(
            "orchestrator",
            "orchestrator",
            prompts.orchestrate(problem, cfg.max_subtasks),
            cfg.new_tokens_for("orchestrator"),
        )
    ]
    subtasks = prompts.parse_subtasks(orchestrator.text, cfg.max_subtasks)
    malformed: dict[str, int] = {}
    results: list[str] = []
    if not subtasks:
        malformed["no_subtasks"] = 1
    else:
        budget = cfg.new_tokens_for("worker")
        workers = yield [
            Request(f"worker{i}", "worker", prompts.work(problem, s), budget)
            for i, s in enumerate(subtasks)
        ]
        results = [w.text for w in workers]
    (synthesizer,) = yield [
        Request(
            "synthesizer",
            "synthesizer",
            prompts.synthesize(problem, subtasks, results),
            cfg.new_tokens_for("synthesizer"),
        )
    ]
    final = synthesizer.text
    return Outcome(
        final=final,
        judgements=[Judgement(synthesizer.turn, final, "answer")],
        malformed=malformed,
    )
