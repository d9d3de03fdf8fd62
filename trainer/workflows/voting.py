"""Voting: `n_voters` generators answer in parallel, an aggregator reads them and decides.

With `distinct_prompts` off (the study's setting) every generator gets the same prompt, so
the only difference between them is sampling noise; on, each gets a paraphrase — the ablation
that separates the topology from prompt overlap. Where the task says so (`picks_candidate`,
code) the aggregator picks a candidate by number and that candidate is the final answer.
"""

from __future__ import annotations

from trainer.tasks import task_class
from trainer.tasks.base import Problem
from trainer.workflows import Context, Judgement, Outcome, Request, WorkflowRun


def run(problem: Problem, ctx: Context) -> WorkflowRun:
    cfg, prompts = ctx.config, ctx.prompts
    budget = cfg.new_tokens_for("generator")
    voters = yield [
        Request(
            f"generator{i}",
            "generator",
            prompts.solve(problem, variant=i if cfg.distinct_prompts else 0),
            budget,
        )
        for i in range(cfg.n_voters)
    ]
    candidates = [v.text for v in voters]
    (aggregator,) = yield [
        Request(
            "aggregator",
            "aggregator",
            prompts.aggregate(problem, candidates),
            cfg.new_tokens_for("aggregator"),
        )
    ]
    malformed: dict[str, int] = {}
    if not task_class(ctx.task_name).picks_candidate:
        final = aggregator.text  # the aggregator writes the final answer itself
    else:
        choice = prompts.parse_choice(aggregator.text, len(candidates))
        if choice is None:
            malformed["no_choice"] = 1
            final = None
        else:
            final = candidates[choice]
    judgements = [Judgement(v.turn, v.text, "answer") for v in voters]
    judgements.append(Judgement(aggregator.turn, final or "", "answer"))
    return Outcome(final=final, judgements=judgements, malformed=malformed)
