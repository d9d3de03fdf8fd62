"""What every task is: problems with their answers, how a completion is read, how it is scored.

A `Task` holds its train and test problems (deterministic for its dataset and seed), samples
from them reproducibly, extracts the answer (math) or the program (code) from a completion
and scores it 1.0 or 0.0. `reward` has the signature of a TRL reward function, so the same
scorer serves our GRPO loop, TRL and the tests.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SPLITS = ("train", "test")


@dataclass(frozen=True)
class Subproblem:
    """An independent piece of a synthetic problem (what an Orch-Workers worker solves)."""

    compact: str  # e.g. "3*4" (code: "add 3")
    question: str  # natural-language version
    answer: str  # e.g. "12" (code: "x=x+3")


@dataclass(frozen=True)
class Problem:
    id: str  # stable, e.g. "synthetic-math-test-17"
    question: str  # natural-language statement for real models
    compact: str  # compact statement for the tiny built-in models (== question when loaded)
    answer: str  # math: canonical final answer; code: a reference solution ('' if unknown)
    tests: tuple[str, ...] = ()  # code: test code (assert lines / a check program)
    entry_point: str = ""  # code: the function under test ('' for stdin/stdout programs)
    subproblems: tuple[Subproblem, ...] = ()  # synthetic only
    # Extras (difficulty, source, a code prompt's prefix...). Left out of ==/hash so that a
    # Problem stays hashable; the id identifies it.
    meta: dict = field(default_factory=dict, compare=False, hash=False)


class Task:
    """Base class: subclasses fill `_splits` and implement `extract` and `score`.

    A subclass is also the one place for what else is specific to its kind of task: the class
    attributes and class-level methods below say how a workflow shows and aggregates its
    candidates, how prompts ask for an answer, the config defaults and the built-in synthetic
    dataset. A new task is one module with one subclass, named in
    `trainer.tasks.TASK_CLASSES`. (How the tiny models learn its formats is not the task's:
    see `trainer.transcripts`.)
    """

    name: str = ""
    # --- what the config, the workflows and the prompts need to know ------------------------
    max_rounds: int = 2  # Eval-Opt's default rounds
    paper_dataset: str = ""  # the dataset the `paper` preset resolves to
    # The aggregator names a candidate by number (its program is the final answer) instead of
    # writing the final answer itself.
    picks_candidate: bool = False
    answer_rule: str = ""  # how a chat model is asked for its final answer
    aggregate_rule: str = ""  # how a chat aggregator is asked to decide

    @classmethod
    def candidate_view(cls, completion: str) -> str:
        """What other agents (aggregator, evaluator) see of a completion."""
        raise NotImplementedError

    @classmethod
    def result_view(cls, completion: str) -> str:
        """What the tiny synthesizer sees of a worker's result."""
        return completion.strip()

    @classmethod
    def tiny_candidates(cls, views: list[str]) -> str:
        """The candidates' lines of the tiny aggregator prompt."""
        return "".join(f"\nC{i + 1}:{v}" for i, v in enumerate(views))

    @classmethod
    def from_row(
        cls, row: dict[str, Any], problem_id: str, question: str, where: str, source: str
    ) -> Problem:
        """A problem from one row of a JSONL dataset (ValueError naming `where` if bad)."""
        raise NotImplementedError

    @classmethod
    def synthetic(cls, seed: int, **knobs: Any) -> Task:
        """The built-in synthetic dataset of this task."""
        raise NotImplementedError

    def __init__(self, dataset: str, splits: dict[str, list[Problem]], seed: int = 0):
        self.dataset = dataset
        self.seed = seed
        self._splits = splits

    def __repr__(self) -> str:
        # Only splits already built: a repr must not generate 20,000 problems.
        sizes = [
            f"{name}={len(dict.__getitem__(self._splits, name))}"
            for name in self._splits
            if dict.__contains__(self._splits, name)
        ]
        return f"{type(self).__name__}({', '.join([f'dataset={self.dataset!r}', *sizes])})"

    def problems(self, split: str) -> list[Problem]:
        """Every problem of a split ("train" or "test"), always in the same order."""
        if split not in self._splits:
            raise ValueError(f"split must be one of {', '.join(self._splits)}, not {split!r}")
        return self._splits[split]

    def sample(self, split: str, n: int, seed: int) -> list[Problem]:
        """n problems drawn with `random.Random(seed)`: without replacement unless n > len."""
        pool = self.problems(split)
        if not pool:
            raise ValueError(f"the {split} split of {self.dataset} is empty")
        rng = random.Random(seed)
        if n <= len(pool):
            return rng.sample(pool, n)
        return [rng.choice(pool) for _ in range(n)]

    def extract(self, completion: str) -> str | None:
        raise NotImplementedError

    def score(self, problem: Problem, completion: str) -> float:
        raise NotImplementedError

    def score_many(self, problems: list[Problem], completions: list[str]) -> list[float]:
        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
        return [self.score(p, c) for p, c in zip(problems, completions)]

    def second_opinion(self, problems: list[Problem], completions: list[str]) -> list[bool | None]:
        """An independent re-check of passing completions, per completion: True (agrees),
        False (disagrees: reward hacking suspected) or None (no independent way to check).
        A task whose scorer is its own comparison (math) has none."""
        return [None] * len(problems)

    def reward(self, completions: list, **kwargs: Any) -> list[float]:
        """TRL reward-function shape: one float per completion.

        Pass `problem=[Problem, ...]` (one per completion), or the raw columns `answer=[...]`
        (math) / `tests=[...]` with optional `entry_point=[...]` (code). Conversational
        completions (lists of {"role", "content"} messages) are scored on their last message.
        """
        texts = [_completion_text(c) for c in completions]
        problems = kwargs.get("problem")
        if problems is None:
            problems = self._problems_from_columns(len(texts), kwargs)
        return self.score_many(list(problems), texts)

    def _problems_from_columns(self, n: int, columns: dict[str, Any]) -> list[Problem]:
        answers = columns.get("answer")
        tests = columns.get("tests")
        if answers is None and tests is None:
            raise ValueError("reward() needs problem=[...], answer=[...] or tests=[...]")
        entry_points = columns.get("entry_point") or [""] * n
        problems = []
        for i in range(n):
            test = tests[i] if tests is not None else ()
            problems.append(
                Problem(
                    id=f"reward-{i}",
                    question="",
                    compact="",
                    answer=str(answers[i]) if answers is not None else "",
                    tests=(test,) if isinstance(test, str) else tuple(test),
                    entry_point=entry_points[i] or "",
                )
            )
        return problems


def _completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


SYNTHETIC_SIZES = {"train": 20_000, "test": 1_000}  # the built-in datasets' split sizes
TEST_FRACTION = 0.05  # share of a synthetic problem space reserved for the test split
MAX_REDRAWS = 400  # draws before a generator gives up on its split's pool
ENUMERATE_LIMIT = 5_000  # strata up to this many problems are split exactly, by rank


def split_of(key: str, test_fraction: float) -> str:
    """A deterministic train/test assignment from a stable hash of `key`.

    CRC-32, not Python's `hash`, which changes from process to process.
    """
    return "test" if zlib.crc32(key.encode()) < test_fraction * 2**32 else "train"


class StratumSplit:
    """Which split a generated problem text belongs to, for one stratum of a generator.

    Large strata use `split_of` (a hash threshold). A small stratum — say the 37 one-step
    programs — could by chance have no text below the threshold, so its texts are enumerated
    and the `test_fraction` with the smallest hashes (at least one, and never all) go to test.
    """

    def __init__(self, texts: Callable[[], Iterable[str]], size: int, test_fraction: float):
        self.test_fraction = test_fraction
        self._texts = texts if size <= ENUMERATE_LIMIT else None
        self._test_texts: set[str] | None = None

    def __call__(self, text: str) -> str:
        if self._texts is None:
            return split_of(text, self.test_fraction)
        if self._test_texts is None:  # enumerated on first use
            ranked = sorted(set(self._texts()), key=lambda t: (zlib.crc32(t.encode()), t))
            n_test = min(max(1, round(self.test_fraction * len(ranked))), len(ranked) - 1)
            self._test_texts = set(ranked[:n_test])
        return "test" if text in self._test_texts else "train"


class LazySplits(dict):
    """A split's problems are generated the first time it is asked for, then kept."""

    def __init__(self, make, names=("train", "test")):
        super().__init__()
        self._make = make
        self._names = tuple(names)

    def __contains__(self, key) -> bool:
        return key in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def keys(self):
        return list(self._names)

    def items(self):
        return [(name, self[name]) for name in self._names]

    def __missing__(self, key):
        if key not in self._names:
            raise KeyError(key)
        value = self._make(key)
        self[key] = value
        return value


def synthetic_splits(
    dataset: str,
    seed: int,
    sizes: dict[str, int],
    lengths: range,
    units: Sequence,
    compact: Callable[[Sequence], str],
    draw: Callable[[random.Random, int], Sequence],
    build: Callable[[str, Sequence, random.Random], Problem],
) -> LazySplits:
    """The train and test splits of a built-in generator whose problems chain `k` units
    (terms, operations) for each `k` in `lengths`.

    A problem's split is decided by its compact text (`StratumSplit`, one stratum per length
    over every chain of `units`), so no test problem is ever a training problem. Each split is
    drawn from its own seeded stream: `draw(rng, k)` proposes a chain, redrawn until it falls in
    the split, and `build(id, chain, rng)` makes the problem.
    """
    strata = {
        k: StratumSplit(
            lambda k=k: (compact(chain) for chain in itertools.product(units, repeat=k)),
            len(units) ** k,
            TEST_FRACTION,
        )
        for k in lengths
    }

    def make(split: str) -> list[Problem]:
        rng = random.Random(f"synthetic-{dataset}-{seed}-{split}")
        problems = []
        for i in range(sizes[split]):
            # Redraw the chain but keep its length, so each split keeps the same mix of
            # lengths even though the pools cover each length unevenly.
            k = lengths[0] + int(rng.random() * len(lengths))
            for _ in range(MAX_REDRAWS):
                chain = draw(rng, k)
                if strata[k](compact(chain)) == split:
                    break
            problems.append(build(f"synthetic-{dataset}-{split}-{i}", chain, rng))
        return problems

    return LazySplits(make)
