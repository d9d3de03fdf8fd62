"""Each workflow's turn structure: roles, counts, stopping rules, malformed outputs, routing."""

from __future__ import annotations

import pytest

from trainer.config import make_config
from trainer.episode import Turn
from trainer.policies import agent_policy
from trainer.tasks.base import Problem, Subproblem
from trainer.workflows import Context, agents, runner
from trainer.workflows.prompts import ChatPrompts, TinyPrompts

PROBLEM = Problem(
    id="p1",
    question="Compute (3*4)+(5+2).",
    compact="(3*4)+(5+2)",
    answer="19",
    subproblems=(Subproblem("3*4", "Compute 3*4.", "12"), Subproblem("5+2", "Compute 5+2.", "7")),
)


def drive(workflow: str, responder, task: str = "math", **overrides):
    """Run one workflow coroutine with scripted completions; return (stages, outcome)."""
    config = make_config("cpu-demo", workflow=workflow, task=task, **overrides)
    ctx = Context(config=config, prompts=TinyPrompts(task), task_name=task)
    co = runner(workflow)(PROBLEM, ctx)
    stages = []
    requests = next(co)
    while True:
        stages.append([(r.agent, r.role) for r in requests])
        for r in requests:
            r.text = responder(r)
            r.turn = Turn(r.role, r.agent, "p", len(stages) - 1, [1], [2], [0.0], r.text)
        try:
            requests = co.send(requests)
        except StopIteration as stop:
            return stages, stop.value


def test_single_has_one_solver_turn():
    stages, outcome = drive("single", lambda r: "\\boxed{19}")
    assert stages == [[("solver", "solver")]]
    assert outcome.final == "\\boxed{19}"


def test_voting_runs_voters_in_one_stage_then_the_aggregator():
    stages, outcome = drive("voting", lambda r: "\\boxed{19}", n_voters=3)
    assert stages == [
        [("generator0", "generator"), ("generator1", "generator"), ("generator2", "generator")],
        [("aggregator", "aggregator")],
    ]
    assert len(outcome.judgements) == 4


def test_voting_gives_same_prompt_unless_distinct_prompts():
    seen = []
    drive("voting", lambda r: seen.append(r.prompt) or "\\boxed{1}")
    assert len(set(seen[:3])) == 1
    seen.clear()
    drive("voting", lambda r: seen.append(r.prompt) or "\\boxed{1}", distinct_prompts=True)
    assert len(set(seen[:3])) == 3


def test_voting_on_code_uses_the_chosen_candidate():
    def respond(r):
        if r.role == "aggregator":
            return "\\boxed{2}"
        return f"def f(x): x=x+{r.agent[-1]}; return x"

    _, outcome = drive("voting", respond, task="code")
    assert outcome.final == "def f(x): x=x+1; return x"
    _, outcome = drive("voting", lambda r: "nonsense", task="code")
    assert outcome.final is None and outcome.malformed == {"no_choice": 1}


def test_eval_opt_stops_when_the_evaluator_accepts():
    stages, outcome = drive("eval_opt", lambda r: "yes" if r.role == "evaluator" else "\\boxed{19}")
    assert [s[0][1] for s in stages] == ["generator", "evaluator"]
    assert outcome.final == "\\boxed{19}"


def test_eval_opt_revises_until_max_rounds_without_a_final_evaluation():
    stages, outcome = drive(
        "eval_opt", lambda r: "no" if r.role == "evaluator" else "\\boxed{18}", max_rounds=3
    )
    assert [s[0][1] for s in stages] == ["generator", "evaluator"] * 2 + ["generator"]
    assert outcome.malformed == {}


def test_eval_opt_counts_a_missing_verdict_as_malformed_rejection():
    stages, outcome = drive(
        "eval_opt", lambda r: "hmm" if r.role == "evaluator" else "\\boxed{18}", max_rounds=2
    )
    assert len(stages) == 3 and outcome.malformed == {"no_verdict": 1}


def test_code_eval_opt_defaults_to_two_rounds():
    stages, _ = drive("eval_opt", lambda r: "no", task="code")
    assert len(stages) == 3  # generate, evaluate, generate


def test_orch_workers_fans_out_one_worker_per_subtask_capped_at_max_subtasks():
    def respond(r):
        return {"orchestrator": "3*4;5+2;1+1;2+2", "worker": "\\boxed{1}"}.get(r.role, "\\boxed{2}")

    stages, outcome = drive("orch_workers", respond, max_subtasks=3)
    assert stages[0] == [("orchestrator", "orchestrator")]
    assert stages[1] == [("worker0", "worker"), ("worker1", "worker"), ("worker2", "worker")]
    assert stages[2] == [("synthesizer", "synthesizer")]
    assert outcome.final == "\\boxed{2}"


def test_orch_workers_with_an_empty_plan_skips_workers_and_counts_it():
    stages, outcome = drive("orch_workers", lambda r: "" if r.role == "orchestrator" else "x")
    assert [s[0][1] for s in stages] == ["orchestrator", "synthesizer"]
    assert outcome.malformed == {"no_subtasks": 1}


@pytest.mark.parametrize(
    "sharing, expected",
    [
        ("shared", {"shared"}),
        ("per_role", {"generator", "aggregator"}),
        ("per_agent", {"generator0", "generator1", "generator2", "aggregator"}),
    ],
)
def test_routing_follows_sharing(sharing, expected):
    config = make_config("cpu-demo", workflow="voting", sharing=sharing)
    assert {agent_policy(config, a, r) for a, r in agents(config)} == expected


def test_chat_prompts_parse_verdicts_subtasks_and_choices():
    chat = ChatPrompts("math", tokenizer=None)
    assert chat.parse_verdict("Looks fine.\nVERDICT: ACCEPT") is True
    assert chat.parse_verdict("VERDICT: reject") is False
    assert chat.parse_verdict("no idea") is False
    assert chat.parse_verdict("") is None
    assert chat.parse_subtasks("SUBTASK: a\nSUBTASK 2: b\nnoise\nSUBTASK: c", 2) == ["a", "b"]
    assert chat.parse_choice("I pick \\boxed{3}", 3) == 2
    assert chat.parse_choice("\\boxed{4}", 3) is None
