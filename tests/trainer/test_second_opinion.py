"""The second opinion on code rewards: passing programs checked again in another way — the
program run as in the main check, its results compared here by rules of the re-check's own;
the rollout marks and counts the disagreements, in all and per role, so a verifier hole nobody
has found yet still shows."""

from __future__ import annotations

import pytest

import sandbox
from tests.sandbox.code_attacks import ATTACKS
from tests.sandbox.sandbox_probe import DISCOVERY
from trainer.episode import Episode, Turn
from trainer.rollout import RolloutStats, _second_opinion
from trainer.tasks import code, load_task, second_opinion
from trainer.tasks.base import Problem
from trainer.tasks.code import CodeTask
from trainer.tasks.harness import call_tests, stdio_tests
from trainer.tasks.second_opinion import plan, same_result
from trainer.workflows import Judgement, Outcome

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def task() -> CodeTask:
    return load_task("code", "synthetic", seed=0, train_size=200, test_size=16)


def fenced(program: str) -> str:
    return f"```python\n{program}\n```"


def test_the_synthetic_asserts_read_as_plain_cases(task):
    problem = task.problems("test")[0]
    found = plan(problem.tests, "f", "assert")
    assert found.rule == "equal" and found.entry_point == "f" and found.tolerance == 0.0
    assert [
        f"assert f({x}) == {want}"
        for x, want in zip(
            [int(t.split("(")[1].split(")")[0]) for t in problem.tests], found.expected
        )
    ] == list(problem.tests)
    # The checker's side never holds an expected value.
    assert all(f"== {want}" not in found.tests for want in found.expected)


def test_tests_of_another_shape_cannot_be_rechecked():
    assert plan(("assert f(1) > 0",), "f", "assert") is None
    assert plan(("assert f(x) == 1",), "f", "assert") is None  # not a literal argument
    assert plan(("def helper():\n    pass\n",), "f", "assert") is None
    check = "def check(candidate):\n    assert candidate(1) == 2\ncheck(f)\n"
    found = plan((check,), "f", "assert", helpers="def g():\n    return 1\n")
    assert found.rule == "check" and "def g():" in found.tests  # HumanEval: with the helpers


def test_the_recheck_is_stricter_than_an_assert():
    # An `assert f(2) == 4` passes 4.0 and True == 1 in the checker; the re-check wants the
    # literal's own type, and no tolerance where the problem states none.
    assert same_result(4, 4) and not same_result(4.0, 4) and not same_result(True, 1)
    assert not same_result(0.1 + 0.2, 0.3) and same_result(0.1 + 0.2, 0.3, 1e-9)
    assert not same_result((1, 2), [1, 2]) and same_result((1, 2), [1, 2], json_values=True)
    assert same_result({1, (2, 3)}, {(2, 3), 1}) and not same_result({True}, {1})
    assert not same_result([[1]] * 3, [[1]] * 2)


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
    # the re-check's checker only fetches values, and fails the program for what it returns.
    problems = task.problems("test")[:3]
    forged = fenced(DISCOVERY.format(module="unittest.__main__"))
    assert task.second_opinion(problems, [forged] * 3) == [False] * 3


def test_the_rollout_marks_and_counts_passing_answers_the_recheck_fails(task):
    # A verifier with a hole nobody has found: it paid 1.0 for a program that returns 0.
    problems = task.problems("test")[:2]
    hacked, honest = fenced("def f(x):\n    return 0"), fenced(problems[1].answer)
    episodes = [
        solo(problems[0], 0, hacked, 1.0),
        solo(problems[0], 1, hacked, 1.0),
        solo(problems[1], 0, honest, 1.0),
        solo(problems[1], 1, "no code", 0.0),
    ]
    owners = [problems[0], problems[0], problems[1], problems[1]]
    stats = RolloutStats()
    _second_opinion(episodes, owners, outcomes_of(episodes), task, (0, "train", 1), stats, 4, False)
    assert [ep.verdict_disagreement for ep in episodes] == [True, True, False, False]
    assert (stats.verdicts_rechecked, stats.verdict_disagreements) == (2, 1)
    assert stats.rechecked_by_role == {"solver": 2}
    assert stats.disagreements_by_role == {"solver": 1}


def solo(problem: Problem, sample: int, text: str, reward: float) -> Episode:
    turn = Turn("solver", "solver", "solver", 0, [], [], [], text=text, score=reward)
    return Episode(problem.id, sample, [turn], answer=text, reward=reward)


def outcomes_of(episodes: list[Episode]) -> list[Outcome]:
    return [
        Outcome(ep.answer, [Judgement(t, t.text, "answer") for t in ep.turns]) for ep in episodes
    ]


@pytest.mark.parametrize("size", [0, 3, 8])
def test_the_sample_size_is_the_configured_one(task, size):
    problems = task.problems("test")[:8]
    episodes = [solo(p, 0, fenced(p.answer), 1.0) for p in problems]
    stats = RolloutStats()
    _second_opinion(
        episodes, problems, outcomes_of(episodes), task, (0, "train", 1), stats, size, False
    )
    assert stats.verdicts_rechecked == size
    assert stats.verdict_disagreements == 0


def test_the_sample_size_is_a_validated_config_field():
    from trainer.config import ConfigError, make_config

    assert make_config(second_opinion_sample=12).second_opinion_sample == 12
    assert make_config().hash() == make_config(second_opinion_sample=4).hash()
    for bad in (-1, 257, "many"):
        with pytest.raises(ConfigError) as raised:
            make_config(second_opinion_sample=bad)
        assert "second_opinion_sample" in raised.value.errors


def test_per_role_rewards_recheck_intermediate_answers_too(task):
    # Voting: two voters and an aggregator. A voter's wrong program was paid (per_role) by a
    # verifier with a hole; the final answer, the other voter's, is right.
    problem = task.problems("test")[0]
    right, hacked = fenced(problem.answer), fenced("def f(x):\n    return 0")
    voters = [
        Turn("voter", f"voter{i}", "voter", 0, [], [], [], text=t, score=1.0)
        for i, t in enumerate((right, hacked))
    ]
    aggregator = Turn("aggregator", "aggregator", "aggregator", 1, [], [], [], text="1", score=1.0)
    outcome = Outcome(right, [Judgement(v, v.text, "answer") for v in voters])
    outcome.judgements.append(Judgement(aggregator, right, "answer"))
    episode = Episode(problem.id, 0, [*voters, aggregator], answer=right, reward=1.0)
    for per_role, rechecked, failed in (
        (False, {"aggregator": 1}, {}),
        (True, {"aggregator": 1, "voter": 2}, {"voter": 1}),
    ):
        episode.verdict_disagreement = False
        stats = RolloutStats()
        _second_opinion([episode], [problem], [outcome], task, (0, "train", 1), stats, 8, per_role)
        assert stats.rechecked_by_role == rechecked
        assert stats.disagreements_by_role == failed
        assert episode.verdict_disagreement is per_role


def test_the_recheck_catches_what_the_old_comparisons_let_through():
    # Each wrong program of the attacks: the main check now fails it too, but the second
    # opinion must catch it on its own, or it shares the blind spot it is there to find.
    problems = [p for p, _, _ in ATTACKS.values()]
    task = CodeTask("attacks", {"train": [], "test": problems}, timeout=10.0)
    wrong = [w for _, w, _ in ATTACKS.values()]
    right = [r for _, _, r in ATTACKS.values()]
    assert task.second_opinion(problems, wrong) == [False] * len(problems)
    assert task.second_opinion(problems, right) == [True] * len(problems)


PROBE = """
import linecache, os, resource, sys, zlib
def is_open(fd):
    try:
        return os.fstat(fd) is not None
    except OSError:
        return False
print([fd for fd in range(64) if is_open(fd)], file=sys.stderr)
print(sorted(os.environ.items()), os.getcwd(), sys.argv, file=sys.stderr)
print([resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU)], file=sys.stderr)
print(zlib.crc32("".join(linecache.getlines("<program>")).encode()), file=sys.stderr)
def f(x):
    return x
"""


def test_the_program_cannot_tell_the_recheck_from_the_main_check():
    # What a program can look at — its descriptors, command line, environment, its own
    # source (the job's code) — is the same in both checks.
    problem = Problem("same", "", "", "", tests=("assert f(1) == 1",), entry_point="f")
    task = CodeTask("same", {"train": [], "test": [problem]}, timeout=10.0)
    main = task.run(problem, fenced(PROBE))
    assert main.passed

    found = second_opinion.plan(problem.tests, "f", "assert")
    job = sandbox.tests_job(
        code.program_side(PROBE.strip("\n"), "assert"), found.tests, "f", **task._limits()
    )
    again = sandbox.run_many([job])[0]
    assert again.passed
    assert again.stderr == main.stderr
    assert task._job(*code._key(problem, PROBE.strip("\n"))).code == job.code
