"""Dataset loaders: HumanEval and GSM-Symbolic from their packages, JSONL files, and the
DAPO-Math / DeepCoder parsers on small hand-made files."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from trainer.tasks import load_task
from trainer.tasks.answers import to_fraction
from trainer.tasks.datasets import parse_deepcoder_tests

# --- humaneval ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval():
    return load_task("code", "humaneval")


def test_humaneval_splits_130_34_by_task_id(humaneval):
    train, test = humaneval.problems("train"), humaneval.problems("test")
    assert (len(train), len(test)) == (130, 34)
    assert not {p.id for p in train} & {p.id for p in test}
    assert [p.id for p in test] == [
        p.id for p in load_task("code", "humaneval", seed=9).problems("test")
    ]
    problem = test[0]
    assert problem.id.startswith("HumanEval/")
    assert problem.tests[0].rstrip().endswith(f"check({problem.entry_point})")
    assert problem.meta["prefix"] in problem.question


def test_humaneval_solutions_pass_whole_or_as_a_body(humaneval):
    problems = humaneval.problems("test")[:4]
    bodies = [p.answer[len(p.meta["prefix"]) :] for p in problems]
    whole = [f"```python\n{p.answer}\n```" for p in problems]
    assert humaneval.score_many(problems, bodies) == [1.0] * 4
    assert humaneval.score_many(problems, whole) == [1.0] * 4
    wrong = [f"def {p.entry_point}(*args, **kwargs):\n    return None\n" for p in problems]
    assert humaneval.score_many(problems, wrong) == [0.0] * 4


# --- gsm_symbolic -------------------------------------------------------------------------


def test_gsm_symbolic_is_generated_offline_with_disjoint_splits():
    task = load_task("math", "gsm_symbolic", seed=1, train_size=60, test_size=15)
    train, test = task.problems("train"), task.problems("test")
    assert (len(train), len(test)) == (60, 15)
    assert not {p.question for p in train} & {p.question for p in test}
    assert all(to_fraction(p.answer) is not None for p in train + test)  # a few are decimals
    again = load_task("math", "gsm_symbolic", seed=1, train_size=60, test_size=15)
    assert again.problems("test") == test
    problem = test[0]
    assert task.score(problem, f"so it is \\boxed{{{problem.answer}}}") == 1.0
    assert task.score(problem, f"\\boxed{{{int(problem.answer) + 1}}}") == 0.0


# --- JSONL --------------------------------------------------------------------------------


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_math_jsonl_file_with_its_own_splits(tmp_path):
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"question": "1+1?", "answer": "2", "split": "train"},
            {"question": "half of 1?", "answer": "\\frac{1}{2}", "split": "test", "id": "h"},
        ],
    )
    task = load_task("math", str(path))
    assert [p.question for p in task.problems("train")] == ["1+1?"]
    (test,) = task.problems("test")
    assert test.id == "h" and test.compact == test.question
    assert task.score(test, "\\boxed{0.5}") == 1.0


def test_a_jsonl_file_without_splits_is_split_by_hash(tmp_path):
    rows = [{"question": f"What is {i}+0?", "answer": str(i)} for i in range(200)]
    task = load_task("math", str(write_jsonl(tmp_path / "plain.jsonl", rows)))
    train, test = task.problems("train"), task.problems("test")
    assert len(train) + len(test) == 200
    assert 5 <= len(test) <= 40
    assert not {p.question for p in train} & {p.question for p in test}


def test_a_code_jsonl_file_is_scored_in_the_sandbox(tmp_path):
    path = write_jsonl(
        tmp_path / "code.jsonl",
        [
            {
                "question": "double",
                "tests": ["assert double(2) == 4"],
                "entry_point": "double",
                "split": "test",
            },
            {
                "question": "triple",
                "tests": "assert triple(1) == 3",
                "entry_point": "triple",
                "split": "train",
            },
        ],
    )
    task = load_task("code", str(path))
    (double,) = task.problems("test")
    assert double.tests == ("assert double(2) == 4",)
    assert task.score(double, "def double(x):\n    return 2 * x") == 1.0
    assert task.score(double, "def double(x):\n    return x") == 0.0


@pytest.mark.parametrize(
    "row, message",
    [
        ({"answer": "2"}, "question"),
        ({"question": "1+1?"}, "answer"),
        ({"question": "1+1?", "answer": "2", "split": "dev"}, "split"),
    ],
)
def test_bad_jsonl_rows_are_reported_with_their_line(tmp_path, row, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"question": "ok", "answer": "1"}, row])
    with pytest.raises(ValueError, match=rf"bad.jsonl:2: .*{message}"):
        load_task("math", str(path))


def test_a_missing_jsonl_file_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="JSONL file"):
        load_task("math", str(tmp_path / "nope.jsonl"))


# --- DAPO-Math (local files) --------------------------------------------------------------

DAPO_WRAPPER = (
    "Solve the following math problem step by step. The last line of your response should be "
    "of the form Answer: $Answer (without quotes) where $Answer is the answer to the "
    'problem.\n\n{problem}\n\nRemember to put your answer on its own line after "Answer:".'
)


def dapo_row(problem: str, answer: str, index: str) -> dict:
    return {
        "data_source": "math_dapo",
        "prompt": [{"content": DAPO_WRAPPER.format(problem=problem), "role": "user"}],
        "ability": "MATH",
        "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
        "extra_info": {"index": index},
    }


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path))
    return tmp_path


def test_dapo_math_reads_jsonl_and_parquet_and_strips_the_answer_format(data_dir):
    folder = data_dir / "datasets" / "dapo_math"
    folder.mkdir(parents=True)
    rows = [dapo_row("Find $x$ if $2x = 6$.", "3", "a1"), dapo_row("What is $7^2$?", "49", "a2")]
    write_jsonl(folder / "train.jsonl", rows + rows)  # DAPO-Math-17k repeats its problems
    pd.DataFrame([dapo_row("Compute $1/4 + 1/4$.", "\\frac{1}{2}", "b1")]).to_parquet(
        folder / "test.parquet"
    )
    task = load_task("math", "dapo_math")
    train, test = task.problems("train"), task.problems("test")
    assert [p.question for p in train] == ["Find $x$ if $2x = 6$.", "What is $7^2$?"]
    assert train[0].id == "dapo_math-a1" and train[0].answer == "3"
    (half,) = test
    assert half.question == "Compute $1/4 + 1/4$."
    assert task.score(half, "It is \\boxed{0.5}.") == 1.0


def test_dapo_math_without_a_test_file_holds_out_a_tenth_of_train(data_dir):
    folder = data_dir / "datasets" / "dapo_math"
    folder.mkdir(parents=True)
    write_jsonl(
        folder / "train.jsonl",
        [dapo_row(f"What is {i}+1?", str(i + 1), f"i{i}") for i in range(100)],
    )
    task = load_task("math", "dapo_math")
    assert 2 <= len(task.problems("test")) <= 25
    assert len(task.problems("train")) + len(task.problems("test")) == 100


def test_a_missing_local_dataset_says_where_it_looked_and_what_to_do(data_dir):
    with pytest.raises(FileNotFoundError) as info:
        load_task("math", "dapo_math")
    message = str(info.value)
    assert "'dapo_math'" in message
    assert str(data_dir / "datasets" / "dapo_math" / "train.jsonl") in message
    assert "train.parquet" in message and "TROUPE_DATA_DIR" in message
    with pytest.raises(FileNotFoundError, match="'deepcoder'.*DeepCoder"):
        load_task("code", "deepcoder")


# --- DeepCoder (local files) --------------------------------------------------------------

STDIO_TESTS = [
    {"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
    {"input": "10 -4\n", "output": "6\n", "type": "stdin_stdout"},
]
CALL_TESTS = [
    {"input": [[1, 2, 3]], "output": [6], "type": "function_call", "fn_name": "total"},
    {"input": [[]], "output": [0], "type": "function_call", "fn_name": "total"},
]
LCB_TESTS = [
    {
        "input": "[1, 2]\n3",
        "output": "[1, 2, 3]",
        "testtype": "functional",
        "metadata": {"func_name": "append"},
    },
]
TACO_TESTS = {"inputs": [["2"], ["5"]], "outputs": [["4"], ["25"]]}


def test_deepcoder_test_formats_are_parsed():
    assert parse_deepcoder_tests(json.dumps(STDIO_TESTS)) == (
        "stdio",
        "",
        [("1 2\n", "3\n"), ("10 -4\n", "6\n")],
    )
    assert parse_deepcoder_tests(CALL_TESTS) == ("call", "total", [([[1, 2, 3]], [6]), ([[]], [0])])
    assert parse_deepcoder_tests(json.dumps(LCB_TESTS)) == (
        "call",
        "append",
        [([[1, 2], 3], [1, 2, 3])],
    )
    assert parse_deepcoder_tests(TACO_TESTS) == ("stdio", "", [("2", "4"), ("5", "25")])
    assert parse_deepcoder_tests("not json at all {") is None
    assert parse_deepcoder_tests([]) is None


@pytest.fixture
def deepcoder(data_dir):
    folder = data_dir / "datasets" / "deepcoder"
    folder.mkdir(parents=True)
    write_jsonl(
        folder / "train.jsonl",
        [{"problem": "Add two integers given on one line.", "tests": json.dumps(STDIO_TESTS)}],
    )
    write_jsonl(
        folder / "test.jsonl",
        [
            {"problem": "Return the sum of a list.", "tests": json.dumps(CALL_TESTS)},
            {
                "problem": "Append y to xs.",
                "tests": json.dumps(LCB_TESTS),
                "starter_code": "class Solution:\n    def append(self, xs, y):",
            },
        ],
    )
    return load_task("code", "deepcoder", timeout=3.0)


def test_deepcoder_stdio_problems_run_the_program_once_per_case(deepcoder):
    (problem,) = deepcoder.problems("train")
    assert problem.meta["io"] == "stdio" and "standard input" in problem.question
    good = "a, b = map(int, input().split())\nprint(a + b)"
    via_buffer = "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nprint(a + b)"
    assert deepcoder.score(problem, f"```python\n{good}\n```") == 1.0
    assert deepcoder.score(problem, f"```python\n{via_buffer}\n```") == 1.0
    assert deepcoder.score(problem, "```python\nprint(3)\n```") == 0.0
    assert deepcoder.score(problem, "```python\nimport sys\nsys.exit(0)\n```") == 0.0


def test_deepcoder_function_call_problems_accept_functions_and_solution_classes(deepcoder):
    total, append = deepcoder.problems("test")
    assert total.meta["io"] == "call" and total.entry_point == "total"
    assert deepcoder.score(total, "def total(xs):\n    return sum(xs)") == 1.0
    assert deepcoder.score(total, "def total(xs):\n    return len(xs)") == 0.0
    assert "class Solution" in append.question
    solution = "class Solution:\n    def append(self, xs, y):\n        return xs + [y]"
    assert deepcoder.score(append, f"```python\n{solution}\n```") == 1.0
