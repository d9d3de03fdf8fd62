"""Evaluator-Optimizer: a generator proposes, an evaluator accepts or rejects, up to `max_rounds`.

The loop stops as soon as the evaluator accepts; otherwise the generator revises with the
evaluator's feedback. The final answer is the last proposal (accepted or not). A missing
verdict counts as a rejection and is recorded as malformed.
"""

from __future__ import annotations

from trainer.tasks.base import Problem
from trainer.workflows import Context, Judgement, Outcome, Request, WorkflowRun


def run(problem: Problem, ctx: Context) -> WorkflowRun:
    cfg, prompts = ctx.config, ctx.prompts
    judgements: list[Judgement] = []
    malformed: dict[str, int] = {}
    proposal = feedback = None
    for round_ in range(cfg.max_rounds):
        prompt = (
            prompts.solve(problem)
            if proposal is None
            else prompts.revise(problem, proposal, feedback or "")
        )
        (generator,) = yield [
            Request("generator", "generator", prompt, cfg.new_tokens_for("generator"))
        ]
        proposal = generator.text
        judgements.append(Judgement(generator.turn, proposal, "answer"))
        if round_ == cfg.max_rounds - 1:
            break  # no point judging a proposal nobody will revise
        (evaluator,) = yield [
            Request(
                "evaluator",
                "evaluator",
                prompts.evaluate(problem, proposal),
                cfg.new_tokens_for("evaluator"),
            )
        ]
        verdict = prompts.parse_verdict(evaluator.text)
        if verdict is None:
            malformed["no_verdict"] = malformed.get("no_verdict", 0) + 1
        judgements.append(Judgement(evaluator.turn, proposal, "verdict", accepted=bool(verdict)))
        if verdict:
            break
        feedback = evaluator.text
    return Outcome(final=proposal, judgements=judgements, malformed=malformed)
