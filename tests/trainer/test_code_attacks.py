"""Wrong programs that scored 1.0 through the answer comparisons and the prompt's helpers, run
through `CodeTask.score_many` as the RL loop scores them (here in this process's mode; the
other sandbox modes in tests/sandbox/test_sandbox_modes.py)."""

from __future__ import annotations

import ast

import pytest

from tests.sandbox.code_attacks import ATTACKS, fenced, scores
from trainer.tasks import load_task
from trainer.tasks.code import _key, prompt_helpers

pytestmark = pytest.mark.timeout(300)

# HumanEval problems whose tests call a helper the prompt defines, and a completion that
# redefines the helper so that a wrong solution passes.
HELPER_ATTACKS = {
    "HumanEval/32": "def poly(xs, x):\n    return 0\n\n\ndef find_zero(xs):\n    return 0.0",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\n\ndef decode_cyclic(s):\n    return s",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\n\ndef decode_shift(s):\n    return s",
}


@pytest.fixture(scope="module")
def humaneval():
    task = load_task("code", "humaneval")
    return task, {p.id: p for split in ("train", "test") for p in task.problems(split)}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_scores_0_and_the_right_program_1(name, attack_scores):
    assert attack_scores[name] == [0.0, 1.0]


@pytest.fixture(scope="module")
def attack_scores():
    return scores()


def test_a_redefined_prompt_helper_does_not_fool_the_humaneval_tests(humaneval):
    task, problems = humaneval
    chosen = [problems[name] for name in HELPER_ATTACKS]
    wrong = [fenced(program) for program in HELPER_ATTACKS.values()]
    right = [fenced(p.answer) for p in chosen]
    assert task.score_many(chosen, wrong) == [0.0] * 3
    assert task.score_many(chosen, right) == [1.0] * 3
    assert task.second_opinion(chosen, wrong) == [False] * 3
    assert task.second_opinion(chosen, right) == [True] * 3


def helpers_the_tests_call(problem) -> set[str]:
    """Names the problem's tests use that its prompt defines, the entry point aside."""
    defined = {
        node.name
        for node in ast.parse(problem.meta["prefix"]).body
        if isinstance(node, ast.FunctionDef) and node.name != problem.entry_point
    }
    used = {n.id for t in problem.tests for n in ast.walk(ast.parse(t)) if isinstance(n, ast.Name)}
    return defined & used


def test_every_helper_a_humaneval_test_calls_is_the_prompts_own(humaneval):
    # Read from the dataset itself, so a problem added to it cannot slip by: each helper its
    # tests call is defined again in the checker, after the program's names.
    _, problems = humaneval
    calling = {pid: helpers_the_tests_call(p) for pid, p in problems.items()}
    calling = {pid: names for pid, names in calling.items() if names}
    assert set(HELPER_ATTACKS) <= set(calling)
    for pid, names in calling.items():
        problem = problems[pid]
        tests = _key(problem, "pass")[1]
        helpers = prompt_helpers(problem.meta["prefix"], problem.entry_point)
        assert tests[0] == helpers, pid  # first: the checker runs them before the tests
        defined = {n.name for n in ast.parse(helpers).body if isinstance(n, ast.FunctionDef)}
        assert names <= defined, pid
        assert problem.entry_point not in defined, pid  # the program's own, never the stub


def test_a_prompt_whose_helpers_cannot_be_read_is_refused_when_loaded():
    from trainer.tasks.code import CodeTask

    row = {"tests": "assert f(1) == 1", "entry_point": "f", "prefix": "def h(x:\n"}
    with pytest.raises(ValueError, match="rows.jsonl:3: the prompt of 'f' does not parse"):
        CodeTask.from_row(row, "p3", "q", "rows.jsonl:3", "rows")
    row["prefix"] = "def h(x):\n    return x\n\n\ndef f(x):\n"  # a stub without a body: fine
    problem = CodeTask.from_row(row, "p3", "q", "rows.jsonl:3", "rows")
    assert prompt_helpers(problem.meta["prefix"], "f") == "def h(x):\n    return x\n"
