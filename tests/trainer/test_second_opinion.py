"""The second opinion on code rewards: passing programs re-checked without
the checker, one fresh sandboxed process per test case, compared here; the rollout marks and
counts the disagreements, so a verifier hole nobody has found yet still shows."""

from __future__ import annotations

import pytest

from tests.sandbox.sandbox_probe import DISCOVERY
from trainer.episode import Episode
from trainer.rollout import SECOND_OPINION_SAMPLE, RolloutStats, _second_opinion
from trainer.tasks import load_task
from trainer.tasks.base import Problem
from trainer.tasks.code import CodeTask, call_tests, stdio_tests
from trainer.tasks.second_opinion import Case, agrees, cases

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def task() -> CodeTask:
    return load_task("code", "synthetic", seed=0, train_size=200, test_size=16)


def fenced(program: str) -> str:
    return f"```python\n{program}\n```"


def test_the_synthetic_asserts_read_as_plain_cases(task):
    problem = task.problems("test")[0]
    found = cases(problem.tests, "f", "assert")
    assert len(found) == 5 and all(c.rule == "equal" and c.entry_point == "f" for c in found)
    assert [f"assert f({c.args[0]}) == {c.expected}" for c in found] == list(problem.tests)


def test_tests_of_another_shape_cannot_be_rechecked():
    check = "def check(candidate):\n    assert candidate(1) == 2\ncheck(f)\n"
    assert cases((check,), "f", "assert") is None
    assert cases(("assert f(1) > 0",), "f", "assert") is None
    assert cases(("assert f(x) == 1",), "f", "assert") is None  # not a literal argument
    assert cases(("assert f(1e999) == 1",), "f", "assert") is None  # repr(inf) is a name


def test_a_verdict_is_compared_outside_the_program():
    case = Case("equal", [1, 2], "f", (3,))
    assert agrees(case, True, "noise\n[1, 2]\n")
    assert not agrees(case, True, "[1, 2]\n(1, 2)\n")  # the last line is the answer
    assert not agrees(case, False, "[1, 2]\n")  # the program did not exit cleanly
    assert not agrees(case, True, "__import__('os')\n")  # printed code is only text
    assert agrees(Case("call", [[1, 2]], "f"), True, "(1, 2)\n")  # the harness's own rules
    assert agrees(Case("stdio", "0.5\n"), True, "0.500000\n\n")
    assert agrees(Case("equal", {1}, "f"), True, "frozenset({1})\n")  # == as in the checker
    assert agrees(Case("equal", set(), "f"), True, "set()\n")


def test_real_solutions_agree_and_wrong_ones_do_not(task):
    problems = task.problems("test")[:4]
    right = [fenced(p.answer) for p in problems]
    wrong = [fenced("def f(x):\n    return 0")] * 4
    assert task.second_opinion(problems, right) == [True] * 4
    assert task.second_opinion(problems, wrong) == [False] * 4


def test_call_and_stdio_problems_are_rechecked_too():
    call = Problem(
        "call-1",
        "",
        "",
        "",
        tests=call_tests("twice", [([2], 4), ([5], [10])]),
        entry_point="twice",
        meta={"io": "call"},
    )
    stdio = Problem(
        "stdio-1",
        "",
        "",
        "",
        tests=stdio_tests([("3\n", "6\n"), ("1\n", "2\n")]),
        meta={"io": "stdio"},
    )
    task = CodeTask("loaded", {"train": [], "test": [call, stdio]}, timeout=5.0)
    solutions = [
        fenced("class Solution:\n    def twice(self, x):\n        return 2 * x"),
        fenced("print(2 * int(input()))"),
    ]
    assert task.score_many([call, stdio], solutions) == [1.0, 1.0]
    assert task.second_opinion([call, stdio], solutions) == [True, True]
    wrong = [fenced("def twice(x):\n    return x"), fenced("print(input())")]
    assert task.second_opinion([call, stdio], wrong) == [False, False]


def test_the_completion_that_forged_the_old_checkers_verdict_would_have_been_caught(task):
    # On the checker before it took only plain data, this completion passed every problem;
    # the second opinion never runs a checker, so it fails the program for what it returns.
    problems = task.problems("test")[:3]
    forged = fenced(DISCOVERY.format(module="unittest.__main__"))
    assert task.second_opinion(problems, [forged] * 3) == [False] * 3


def test_the_rollout_marks_and_counts_passing_answers_the_recheck_fails(task):
    # A verifier with a hole nobody has found: it paid 1.0 for a program that returns 0.
    problems = task.problems("test")[:2]
    hacked, honest = fenced("def f(x):\n    return 0"), fenced(problems[1].answer)
    episodes = [
        Episode(problems[0].id, 0, answer=hacked, reward=1.0),
        Episode(problems[0].id, 1, answer=hacked, reward=1.0),
        Episode(problems[1].id, 0, answer=honest, reward=1.0),
        Episode(problems[1].id, 1, answer="no code", reward=0.0),
    ]
    owners = [problems[0], problems[0], problems[1], problems[1]]
    stats = RolloutStats()
    _second_opinion(episodes, owners, task, (0, "train", 1), stats)
    assert [ep.verdict_disagreement for ep in episodes] == [True, True, False, False]
    assert (stats.verdicts_rechecked, stats.verdict_disagreements) == (2, 1)


def test_only_a_sample_of_the_passing_answers_is_rechecked(task):
    problems = task.problems("test")[:8]
    episodes = [Episode(p.id, 0, answer=fenced(p.answer), reward=1.0) for p in problems]
    stats = RolloutStats()
    _second_opinion(episodes, problems, task, (0, "train", 1), stats)
    assert stats.verdicts_rechecked == SECOND_OPINION_SAMPLE
    assert stats.verdict_disagreements == 0


COMPARED = [
    (1, 1),
    (1.0, 1),
    (0.1 + 0.2, 0.3),
    (0.31, 0.3),
    ((1, 2), [1, 2]),
    ([3], [[3]]),
    (True, 1.0),
    ("a", "a"),
    ("a", "b"),
    (None, 0),
    ([1.0000000001], [1]),
]
TEXTS = [
    ("1 2\n", "1 2"),
    ("0.5\n", "0.500000"),
    ("1\n\n2  \n", "1\n2"),
    ("1 2", "1  2 3"),
    ("x", "y"),
    ("1e-9", "0"),
    ("3.0000001", "3"),
    ("", ""),
    ("a\nb", "a"),
]


def _harness_same(template: str) -> object:
    """The harness's own `_troupe_same`, from its source with no cases (nothing runs)."""
    namespace = {"f": lambda: None}  # the entry point the call harness looks up
    exec(template.format(cases="[]", name="f"), namespace)
    return namespace["_troupe_same"]


def test_the_recheck_compares_as_the_harnesses_do():
    # Two copies of one rule (the harness's text runs inside the sandbox): if they drifted, the
    # second opinion would flag honest answers as reward hacking, or miss forged ones.
    from trainer.tasks import code
    from trainer.tasks.second_opinion import same_call_result, same_text

    call_same = _harness_same(code._CALL_CHECK)
    for got, want in COMPARED:
        assert same_call_result(got, want) == call_same(got, want), (got, want)
    stdio_same = _harness_same(code._STDIO_CHECK)
    for got, want in TEXTS:
        assert same_text(got, want) == stdio_same(got, want), (got, want)
