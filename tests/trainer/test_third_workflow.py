"""CONTRIBUTING's "Add a workflow" recipe, followed to the letter on a copy of `trainer/`.

A workflow whose roles reuse existing prompts is two files: its module in
`trainer/workflows/` and one entry in `trainer/routing.py`'s `WORKFLOW_TABLE`. The config's
choices, the roles a per-role setting may name, the agents, the policies under every sharing
mode and the coroutine runner must all follow from that entry. The choices are derived when
`trainer.routing` is imported, so the recipe is tested on an edited copy of the package, in a
fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A drafter answers, a finisher revises the draft: two roles, both on existing prompts.
RELAY = '''
"""Relay: a drafter answers, a finisher revises the draft."""

from __future__ import annotations

from trainer.tasks.base import Problem
from trainer.workflows import Context, Judgement, Outcome, Request, WorkflowRun


def run(problem: Problem, ctx: Context) -> WorkflowRun:
    new = ctx.config.new_tokens_for
    (draft,) = yield [Request("drafter", "drafter", ctx.prompts.solve(problem), new("drafter"))]
    prompt = ctx.prompts.revise(problem, draft.text, "no")
    (final,) = yield [Request("finisher", "finisher", prompt, new("finisher"))]
    return Outcome(final=final.text, judgements=[Judgement(final.turn, final.text, "answer")])
'''

ENTRY = """    "relay": Workflow(
        roles=("drafter", "finisher"), module="trainer.workflows.relay", title="Relay"
    ),
"""

PROBE = """
import json
from trainer.config import WORKFLOWS, make_config
from trainer.episode import Turn
from trainer.policies import policy_names
from trainer.workflows import Context, agents, runner
from trainer.workflows.prompts import TinyPrompts
from trainer.tasks import load_task

out = {"workflows": list(WORKFLOWS)}
config = make_config("cpu-demo", workflow="relay", max_new_tokens_per_role="finisher=16")
out["agents"] = agents(config)
out["policies"] = {
    s: policy_names(make_config("cpu-demo", workflow="relay", sharing=s))
    for s in ("shared", "per_role", "per_agent")
}
problem = load_task("math").problems("test")[0]
co = runner("relay")(problem, Context(config, TinyPrompts("math"), "math"))
stages = []
replies = None
try:
    while True:
        requests = co.send(replies)
        stages.append([(r.role, r.max_new_tokens) for r in requests])
        for r in requests:
            r.text = problem.answer
            r.turn = Turn(r.role, r.agent, "p", len(stages) - 1, [1], [2], [0.0], r.text)
        replies = requests
except StopIteration as stop:
    out["final"] = stop.value.final
out["stages"] = stages
out["answer"] = problem.answer
try:
    make_config("cpu-demo", workflow="relay", max_new_tokens_per_role="solver=16")
except Exception as exc:
    out["bad_role"] = str(exc)
print(json.dumps(out))
"""


def test_a_new_workflow_is_its_module_and_one_table_entry(tmp_path):
    copy = tmp_path / "trainer"
    shutil.copytree(ROOT / "trainer", copy, ignore=shutil.ignore_patterns("__pycache__", "weights"))
    shutil.copytree(ROOT / "vocabulary", tmp_path / "vocabulary")  # the names it imports
    (copy / "workflows" / "relay.py").write_text(RELAY)  # file 1
    routing = (copy / "routing.py").read_text()  # file 2: one entry in WORKFLOW_TABLE
    anchor = "WORKFLOW_TABLE: dict[str, Workflow] = {\n"
    assert routing.count(anchor) == 1
    (copy / "routing.py").write_text(routing.replace(anchor, anchor + ENTRY))

    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])

    assert "relay" in out["workflows"]
    assert out["agents"] == [["drafter", "drafter"], ["finisher", "finisher"]]
    assert out["policies"] == {
        "shared": ["shared"],
        "per_role": ["drafter", "finisher"],
        "per_agent": ["drafter", "finisher"],
    }
    # the per-role token budget reaches the finisher's request; the drafter keeps the default
    assert out["stages"][0][0][0] == "drafter" and out["stages"][1] == [["finisher", 16]]
    assert out["final"] == out["answer"]
    # a per-role setting may name only the workflow's own roles
    assert "solver" in out["bad_role"]
