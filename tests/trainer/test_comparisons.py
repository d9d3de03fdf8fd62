"""The answer comparisons, one table (tests/trainer/comparison_cases.py) against both copies of
the rules: the harness as the sandbox's checker runs it, and the second opinion's own code."""

from __future__ import annotations

import json

import pytest

from tests.trainer.comparison_cases import TEXTS, VALUES
from trainer.tasks.base import Problem
from trainer.tasks.code import CodeTask
from trainer.tasks.harness import call_tests, stdio_tests
from trainer.tasks.second_opinion import same_result, same_text

pytestmark = pytest.mark.timeout(300)


def as_json(value):
    """The expected value as a dataset row gives it to the harness: through JSON."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize(("got", "want", "tolerance", "match"), VALUES)
def test_the_second_opinion_compares_values_by_the_table(got, want, tolerance, match):
    assert same_result(eval(got), as_json(want), tolerance, json_values=True) is match


@pytest.mark.parametrize(("got", "want", "tolerance", "match"), TEXTS)
def test_the_second_opinion_compares_texts_by_the_table(got, want, tolerance, match):
    assert same_text(got, want, tolerance) is match


def test_the_harness_in_the_sandbox_compares_by_the_same_table():
    # Each row becomes a problem with a generated harness and a program that returns (or
    # prints) the row's answer; the checker's verdict must be the table's.
    problems, completions, expected = [], [], []
    for i, (got, want, tolerance, match) in enumerate(VALUES):
        tests = call_tests("f", [([], want)], tolerance)
        problems.append(Problem(f"value-{i}", "", "", "", tests=tests, meta={"io": "call"}))
        completions.append(f"```python\ndef f():\n    return {got}\n```")
        expected.append(float(match))
    for i, (got, want, tolerance, match) in enumerate(TEXTS):
        tests = stdio_tests([("", want)], tolerance)
        problems.append(Problem(f"text-{i}", "", "", "", tests=tests, meta={"io": "stdio"}))
        completions.append(f"```python\nimport sys\nsys.stdout.write({got!r})\n```")
        expected.append(float(match))
    task = CodeTask("table", {"train": [], "test": problems}, timeout=10.0)
    scores = task.score_many(problems, completions)
    rows = [*VALUES, *TEXTS]
    wrong = [(rows[i], s) for i, (s, e) in enumerate(zip(scores, expected)) if s != e]
    assert not wrong, wrong


def test_a_tolerance_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="tolerance"):
        call_tests("f", [([], 1.0)], tolerance=1.5)
