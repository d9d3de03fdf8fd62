"""A third task is one Task subclass plus a line in TASK_CLASSES: prompts, workflows and
dataset loading take everything task-specific from it. Warm-starting the tiny models on it is
one `Writer` subclass plus a line in `trainer.transcripts.WRITERS` (CONTRIBUTING.md)."""

from __future__ import annotations

import random

import pytest

from trainer.config import make_config
from trainer.episode import Turn
from trainer.tasks import TASK_CLASSES, load_task
from trainer.tasks.base import Problem, Subproblem, Task
from trainer.transcripts import WRITERS, base, role_examples
from trainer.transcripts.base import Writer
from trainer.workflows import Context, runner
from trainer.workflows.prompts import ChatPrompts, TinyPrompts


class WordTask(Task):
    """Spell a number in words: the answer is the last line; aggregators pick by number."""

    name = "words"
    picks_candidate = True
    answer_rule = "End with the number in words on a line of its own."
    aggregate_rule = "Reply with the number of the best spelling."

    def extract(self, completion: str) -> str | None:
        lines = completion.strip().splitlines()
        return lines[-1].strip() if lines else None

    def score(self, problem: Problem, completion: str) -> float:
        return 1.0 if self.extract(completion) == problem.answer else 0.0

    @classmethod
    def candidate_view(cls, completion: str) -> str:
        return completion.strip().splitlines()[-1] if completion.strip() else "?"

    @classmethod
    def synthetic(cls, seed: int, **knobs) -> WordTask:
        words = ["one", "two", "three"]
        problems = [
            Problem(
                f"w{i}",
                f"Spell {i + 1}.",
                str(i + 1),
                w,
                subproblems=(Subproblem(str(i + 1), "", w),),
            )
            for i, w in enumerate(words)
        ]
        return cls("synthetic", {"train": problems, "test": problems}, seed)


class WordWriter(Writer):
    """The tiny models' transcripts of WordTask: a spelling is right with P_EASY."""

    @classmethod
    def solution(cls, rng: random.Random, problem: Problem) -> str:
        return problem.answer if rng.random() < base.P_EASY else "zero"

    @classmethod
    def clean(cls, problem: Problem) -> str:
        return problem.answer

    @classmethod
    def aggregate(cls, rng: random.Random, candidates: list[str], clean: str) -> str:
        return f"\\boxed{{{candidates.index(clean) + 1 if clean in candidates else 1}}}"

    @classmethod
    def worker(cls, rng: random.Random, sub: Subproblem) -> str:
        return sub.answer

    @classmethod
    def synthesis(cls, rng: random.Random, results: list[str]) -> str:
        return results[-1]


@pytest.fixture
def words(monkeypatch):
    monkeypatch.setitem(TASK_CLASSES, "words", f"{__name__}:WordTask")
    return load_task("words")


def test_the_prompts_show_and_ask_as_the_task_says(words):
    problem = words.problems("test")[1]
    tiny = TinyPrompts("words").aggregate(problem, ["hmm\ntwo", "three"])
    assert tiny == "Q:2\nC1:two\nC2:three\nA:"
    chat = ChatPrompts("words", tokenizer=None)
    assert chat._answer_rule() == WordTask.answer_rule


def test_voting_takes_the_picked_candidate_as_the_final_answer(words):
    problem = words.problems("test")[1]
    config = make_config("cpu-demo", workflow="voting", n_voters=2)
    ctx = Context(config=config, prompts=TinyPrompts("words"), task_name="words")
    co = runner("voting")(problem, ctx)
    voters = next(co)
    for i, (request, text) in enumerate(zip(voters, ["one", "two"])):
        request.text = text
        request.turn = Turn(request.role, request.agent, "p", 0, [1], [2], [0.0], text)
    (aggregator,) = co.send(voters)
    aggregator.text = "\\boxed{2}"
    aggregator.turn = Turn("aggregator", "aggregator", "p", 1, [1], [2], [0.0], "2")
    with pytest.raises(StopIteration) as stop:
        co.send([aggregator])
    outcome = stop.value.value  # the coroutine's return value
    assert outcome.final == "two" and not outcome.malformed
    assert words.score(problem, outcome.final) == 1.0


def test_a_writer_in_writers_gives_the_tiny_models_every_roles_transcript(words, monkeypatch):
    monkeypatch.setitem(WRITERS, "words", f"{__name__}:WordWriter")
    problem = words.problems("train")[2]
    examples = role_examples(random.Random(0), problem, "words")
    prompts = [prompt for prompt, _ in examples]
    tiny = TinyPrompts("words")
    assert prompts[:4] == [tiny.solve(problem, variant) for variant in range(4)]
    assert tiny.orchestrate(problem, 3) in prompts and tiny.work(problem, "3") in prompts
    assert len(examples) == 4 + 1 + 1 + 1 + 1 + 1 + 1  # solvers, reviser, aggregator,
    # evaluator, orchestrator, one worker per subproblem, synthesizer
    assert dict(examples)[tiny.work(problem, "3")] == "three"
