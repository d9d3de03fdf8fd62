"""The synthetic arithmetic task: generation, splits, sampling, scoring and the reward shape."""

from __future__ import annotations

import re

import pytest

from trainer.tasks import load_task
from trainer.tasks.base import Problem
from trainer.tasks.math import MathTask

COMPACT = re.compile(r"^(\d+[*+]\d+|\(\d+[*+]\d+\)(\+\(\d+[*+]\d+\))+)$")


@pytest.fixture(scope="module")
def task() -> MathTask:
    return load_task("math", "synthetic", seed=0)


def test_the_default_splits_have_fixed_sizes(task):
    assert task.name == "math"
    assert len(task.problems("train")) == 20_000
    assert len(task.problems("test")) == 1_000


def test_every_problem_is_well_formed(task):
    for problem in task.problems("test"):
        assert COMPACT.match(problem.compact), problem.compact
        assert problem.answer == str(eval(problem.compact))  # plain integer arithmetic
        assert (
            problem.question == f"Compute {problem.compact}. Put the final answer in \\boxed{{}}."
        )
        assert 1 <= len(problem.subproblems) <= 3
        for sub in problem.subproblems:
            a, op, b = re.fullmatch(r"(\d+)([*+])(\d+)", sub.compact).groups()
            assert 1 <= int(a) <= 5 and 1 <= int(b) <= 5  # the default max_operand
            assert sub.answer == str(eval(sub.compact))
            assert sub.question == f"Compute {sub.compact}."
        assert sum(int(s.answer) for s in problem.subproblems) == int(problem.answer)
        one = len(problem.subproblems) == 1
        assert problem.compact.startswith("(") != one  # a single term has no parentheses


def test_ids_are_stable_and_unique(task):
    ids = [p.id for p in task.problems("test")]
    assert ids[:2] == ["synthetic-math-test-0", "synthetic-math-test-1"]
    assert len(set(ids)) == len(ids)


def test_test_problems_never_appear_in_train(task):
    train = {p.compact for p in task.problems("train")}
    assert not train & {p.compact for p in task.problems("test")}


def test_every_length_appears_in_both_splits(task):
    for split in ("train", "test"):
        lengths = {len(p.subproblems) for p in task.problems(split)}
        assert lengths == {1, 2, 3}


def test_generation_is_deterministic_per_seed():
    a = load_task("math", seed=3, train_size=50, test_size=20)
    b = load_task("math", seed=3, train_size=50, test_size=20)
    c = load_task("math", seed=4, train_size=50, test_size=20)
    assert a.problems("train") == b.problems("train")
    assert a.problems("test") == b.problems("test")
    assert a.problems("train") != c.problems("train")


def test_difficulty_knobs_shape_the_problems():
    task = load_task("math", min_terms=2, max_terms=2, max_operand=3, train_size=300, test_size=50)
    for problem in task.problems("train") + task.problems("test"):
        assert len(problem.subproblems) == 2
        assert all(int(n) <= 3 for n in re.findall(r"\d+", problem.compact))
    assert not {p.compact for p in task.problems("train")} & {
        p.compact for p in task.problems("test")
    }


def test_even_a_tiny_problem_space_keeps_the_splits_apart():
    # Two possible problems in all (1*1 and 1+1): one is held out for test.
    task = load_task("math", max_terms=1, max_operand=1, train_size=20, test_size=5)
    train = {p.compact for p in task.problems("train")}
    test = {p.compact for p in task.problems("test")}
    assert len(train) == 1 and len(test) == 1 and not train & test


def test_sampling_is_reproducible_and_without_replacement(task):
    first = task.sample("train", 64, seed=7)
    assert first == task.sample("train", 64, seed=7)
    assert first != task.sample("train", 64, seed=8)
    assert len({p.id for p in first}) == 64


def test_sampling_more_than_the_split_holds_draws_with_replacement():
    task = load_task("math", train_size=10, test_size=3)
    drawn = task.sample("test", 8, seed=0)
    assert len(drawn) == 8
    assert {p.id for p in drawn} <= {p.id for p in task.problems("test")}


def test_an_unknown_split_is_refused(task):
    with pytest.raises(ValueError, match="train, test"):
        task.problems("validation")


@pytest.fixture
def problem() -> Problem:
    return Problem("p", "Compute (3*4)+(5+2).", "(3*4)+(5+2)", "19")


@pytest.mark.parametrize(
    "completion, score",
    [
        (r"\boxed{19}", 1.0),
        (r"12+7=\boxed{19}", 1.0),  # the tiny models' format
        (r"The sum is 12 + 7 = 19, so the answer is $\boxed{19}$.", 1.0),
        (r"\boxed{19.0}", 1.0),
        (r"\boxed{18}", 0.0),
        ("19", 0.0),  # no box, no answer
        (r"\boxed{19} wait, no: \boxed{20}", 0.0),  # the last box counts
        ("", 0.0),
    ],
)
def test_a_completion_scores_one_only_with_the_right_boxed_answer(task, problem, completion, score):
    assert task.score(problem, completion) == score


def test_extract_reads_the_boxed_answer(task):
    assert task.extract(r"so \boxed{42}.") == "42"
    assert task.extract("no answer") is None


def test_score_many_scores_each_pair(task, problem):
    assert task.score_many([problem, problem], [r"\boxed{19}", r"\boxed{1}"]) == [1.0, 0.0]
    with pytest.raises(ValueError):
        task.score_many([problem], [])


def test_reward_has_the_trl_shape(task, problem):
    completions = [r"\boxed{19}", r"\boxed{3}"]
    assert task.reward(completions, problem=[problem, problem]) == [1.0, 0.0]
    assert task.reward(completions, answer=["19", "3"], prompts=["a", "b"]) == [1.0, 1.0]
    chat = [[{"role": "assistant", "content": r"\boxed{19}"}]]
    assert task.reward(chat, answer=["19"]) == [1.0]
    with pytest.raises(ValueError, match="problem="):
        task.reward(completions)


def test_problems_are_hashable_and_compare_by_content(task):
    problem = task.problems("test")[0]
    assert {problem: 1}[problem] == 1
    assert problem == task.problems("test")[0]


def test_load_task_refuses_bad_arguments():
    with pytest.raises(ValueError, match="task must be one of math, code, not 'poetry'"):
        load_task("poetry")
    with pytest.raises(ValueError, match="not one of"):
        load_task("math", "mnist")
    with pytest.raises(ValueError, match="code dataset"):
        load_task("math", "humaneval")
    with pytest.raises(ValueError, match="bad option"):
        load_task("math", "synthetic", max_opperand=3)
    with pytest.raises(ValueError, match="min_terms"):
        load_task("math", min_terms=3, max_terms=2)
