"""Single agent: one solver answers the problem (the baseline every workflow is compared to)."""

from __future__ import annotations

from trainer.tasks.base import Problem
from trainer.workflows import Context, Judgement, Outcome, Request, WorkflowRun


def run(problem: Problem, ctx: Context) -> WorkflowRun:
    (solver,) = yield [
        Request("solver", "solver", ctx.prompts.solve(problem), ctx.config.new_tokens_for("solver"))
    ]
    return Outcome(final=solver.text, judgements=[Judgement(solver.turn, solver.text, "answer")])
