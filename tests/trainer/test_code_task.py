"""The synthetic program-synthesis task: generation, program extraction and sandboxed scoring."""

from __future__ import annotations

import re

import pytest

import sandbox
from trainer.tasks import load_task
from trainer.tasks.base import Problem
from trainer.tasks.code import CodeTask, apply_ops, extract_program

CHAIN = re.compile(r"^(add|sub|times|mod) \d$|^neg$|^square$")
STATEMENT = {"add": "x=x+{}", "sub": "x=x-{}", "times": "x=x*{}", "mod": "x=x%{}"}


@pytest.fixture(scope="module")
def task() -> CodeTask:
    return load_task("code", "synthetic", seed=0, train_size=2_000, test_size=200)


def tiny_program(problem: Problem) -> str:
    """What the tiny models write: one line, the statements joined by semicolons."""
    return f"def f(x): {'; '.join(s.answer for s in problem.subproblems)}; return x"


def test_the_default_splits_have_fixed_sizes():
    task = load_task("code")
    assert task.name == "code"
    assert len(task.problems("test")) == 1_000
    assert len(task.problems("train")) == 20_000


def test_every_problem_is_well_formed(task):
    for problem in task.problems("test"):
        chain, example = problem.compact.split(" | ")
        steps = chain.split("; ")
        assert 1 <= len(steps) <= 3
        assert [s.compact for s in problem.subproblems] == steps
        for sub in problem.subproblems:
            assert CHAIN.match(sub.compact), sub.compact
            name, *n = sub.compact.split()
            expected = {"neg": "x=-x", "square": "x=x*x"}.get(name) or STATEMENT[name].format(*n)
            assert sub.answer == expected
            if name == "mod":
                assert int(n[0]) >= 2
        assert re.fullmatch(r"f\(-?\d+\)=-?\d+", example)
        body = "".join(f"    {s.answer}\n" for s in problem.subproblems)
        assert problem.answer == f"def f(x):\n{body}    return x"
        assert problem.entry_point == "f"
        assert len(problem.tests) == 5
        inputs = [int(re.match(r"assert f\((-?\d+)\)", t).group(1)) for t in problem.tests]
        assert 0 in inputs and min(inputs) < 0 and len(set(inputs)) == 5
        assert "def f(x):" in problem.question and "```python" in problem.question
        assert problem.question.count("f(") >= 3  # the signature and two examples


def test_the_examples_and_tests_agree_with_the_reference_semantics(task):
    problem = task.problems("test")[0]
    namespace: dict = {}
    exec(problem.answer, namespace)
    for test in problem.tests:
        exec(test, namespace)  # the reference program satisfies its own hidden tests
    x, y = re.search(r"f\((-?\d+)\)=(-?\d+)", problem.compact).groups()
    assert namespace["f"](int(x)) == int(y)


def test_mod_follows_python_semantics_for_negative_numbers():
    assert apply_ops((("mod", 3),), -7) == 2
    assert apply_ops((("add", 3), ("times", 2), ("neg", 0), ("square", 0)), 1) == 64


def test_test_chains_never_appear_in_train(task):
    def chain(p):
        return p.compact.split(" | ")[0]

    assert not {chain(p) for p in task.problems("train")} & {
        chain(p) for p in task.problems("test")
    }


def test_min_and_max_terms_are_accepted_for_the_chain_length():
    task = load_task("code", min_terms=2, max_terms=2, train_size=30, test_size=10)
    assert all(len(p.subproblems) == 2 for p in task.problems("train"))


@pytest.mark.parametrize(
    "completion, program",
    [
        ("```python\ndef f(x):\n    return x\n```", "def f(x):\n    return x"),
        (
            "first\n```python\ndef f(x): return 1\n```\nbetter:\n```py\ndef f(x): return 2\n```",
            "def f(x): return 2",
        ),
        ("```\ndef f(x): return 3\n```", "def f(x): return 3"),
        ("```python\ndef f(x): return 4\n", "def f(x): return 4"),  # the fence never closed
        ("Sure! def f(x): x=x+3; return x", "def f(x): x=x+3; return x"),
        ("def f(x): x=x+3; x=x*2; return x", "def f(x): x=x+3; x=x*2; return x"),
        ("no code here", None),
        ("", None),
        ("```bash\nls\n```", None),
    ],
)
def test_extract_finds_the_program(completion, program):
    assert extract_program(completion) == program


def test_extract_prefers_the_block_that_defines_the_entry_point():
    completion = "```python\ndef f(x):\n    return x\n```\nUsage:\n```python\nprint(f(2))\n```"
    assert extract_program(completion, "f") == "def f(x):\n    return x"
    assert extract_program(completion) == "print(f(2))"


def test_reference_and_tiny_programs_pass(task):
    problems = task.problems("test")[:12]
    assert task.score_many(problems, [p.answer for p in problems]) == [1.0] * 12
    fenced = [f"Here it is:\n```python\n{p.answer}\n```" for p in problems]
    assert task.score_many(problems, fenced) == [1.0] * 12
    assert task.score_many(problems, [tiny_program(p) for p in problems]) == [1.0] * 12


def test_wrong_missing_and_broken_programs_fail(task):
    problem = task.problems("test")[0]
    assert task.score(problem, "def f(x): return 123456789") == 0.0
    assert task.score(problem, "I do not know.") == 0.0
    assert task.score(problem, "def f(x) return x") == 0.0  # a syntax error
    assert task.score(problem, "def g(x): return x") == 0.0  # the wrong name


def test_a_program_that_never_ends_fails_after_the_timeout():
    task = load_task("code", timeout=0.5, train_size=10, test_size=5)
    problem = task.problems("test")[0]
    assert task.score(problem, "def f(x):\n    while True: pass") == 0.0
    assert task.run(problem, "def f(x):\n    while True: pass").status == "timeout"


def test_exiting_before_the_tests_run_does_not_pass(task):
    problem = task.problems("test")[0]
    assert task.score(problem, "def f(x): return 0\nimport sys\nsys.exit(0)") == 0.0
    assert task.score(problem, "def f(x): return 0\nimport os\nos._exit(0)") == 0.0


def test_scores_are_cached_and_duplicates_run_once(task, monkeypatch):
    calls = []
    real = sandbox.run_many

    def counting(jobs, workers=2):
        calls.append(len(jobs))
        return real(jobs, workers=workers)

    monkeypatch.setattr(sandbox, "run_many", counting)
    problems = task.problems("train")[:3]
    programs = [f"{p.answer}\n# {id(calls)}" for p in problems]  # fresh, so not yet cached
    completions = programs + programs  # each program twice
    assert task.score_many(problems + problems, completions) == [1.0] * 6
    assert calls == [3]
    assert task.score_many(problems, programs) == [1.0] * 3
    assert calls == [3]  # all from the cache


def test_reward_takes_problems_or_test_columns(task):
    problem = task.problems("test")[0]
    good, bad = problem.answer, "def f(x): return None"
    assert task.reward([good, bad], problem=[problem, problem]) == [1.0, 0.0]
    assert task.reward([good], tests=[problem.tests], entry_point=["f"]) == [1.0]
    assert task.reward(["def f(x): return 1"], tests=["assert f(5) == 1"]) == [1.0]


def test_run_returns_the_full_sandbox_result(task):
    problem = task.problems("test")[0]
    result = task.run(problem, "def f(x): return 123456789")
    assert result.status == "failed" and "AssertionError" in result.stderr
    assert task.run(problem, "nothing") is None
