"""Role prompts per model family, and the parsers that read each role's output.

Two families share one interface:
- `TinyPrompts`: compact templates for the built-in tiny models. Their warm start
  (`trainer/tiny.py`) is trained on transcripts (`trainer/transcripts/`) made with these very
  methods, so the formats can never drift apart.
- `ChatPrompts`: natural-language role instructions for real chat models (Qwen3), rendered
  through the tokenizer's chat template with thinking disabled.

Parsers are deliberately forgiving and never raise: a malformed output (no verdict, no
subtasks) yields None or [] and the workflow counts it, as a real pipeline would.
"""

from __future__ import annotations

import re

from trainer.tasks import task_class
from trainer.tasks.answers import extract_boxed
from trainer.tasks.base import Problem

_VERDICT_YES = re.compile(r"\b(yes|accept(?:ed)?|correct)\b", re.IGNORECASE)
_VERDICT_NO = re.compile(r"\b(no|reject(?:ed)?|incorrect|wrong)\b", re.IGNORECASE)
_VERDICT_LINE = re.compile(r"VERDICT:\s*(ACCEPT|REJECT)", re.IGNORECASE)
_SUBTASK_LINE = re.compile(r"^\s*SUBTASK\s*\d*\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_CHOICE = re.compile(r"\d+")

# Paraphrases for parallel same-role agents when `distinct_prompts` is on.
TINY_PREFIXES = ("Q:", "Solve:", "Task:", "Find:")
CHAT_OPENERS = (
    "Solve the following problem.",
    "Work out the answer to this problem.",
    "Here is a problem for you to solve.",
    "Please find the solution to the problem below.",
)


def candidate_view(task: str, completion: str) -> str:
    """What other agents see of a completion (the task's `candidate_view`: the boxed answer of
    math, the program of code)."""
    return task_class(task).candidate_view(completion)


class TinyPrompts:
    """Compact templates; one line per field, the answer slot last."""

    family = "tiny"

    def __init__(self, task: str):
        self.task = task
        self.kind = task_class(task)  # what is specific to the task: views, rules

    def solve(self, problem: Problem, variant: int = 0) -> str:
        return f"{TINY_PREFIXES[variant % len(TINY_PREFIXES)]}{problem.compact}\nA:"

    def aggregate(self, problem: Problem, candidates: list[str]) -> str:
        views = [self.kind.candidate_view(c) for c in candidates]
        return f"Q:{problem.compact}{self.kind.tiny_candidates(views)}\nA:"

    def evaluate(self, problem: Problem, candidate: str) -> str:
        return f"Q:{problem.compact}\nS:{self.kind.candidate_view(candidate)}\nV:"

    def revise(self, problem: Problem, candidate: str, feedback: str, variant: int = 0) -> str:
        return f"Q:{problem.compact}\nS:{self.kind.candidate_view(candidate)}\nV:no\nA:"

    def orchestrate(self, problem: Problem, max_subtasks: int) -> str:
        return f"Q:{problem.compact}\nP:"

    def work(self, problem: Problem, subtask: str) -> str:
        return f"W:{subtask}\nA:"

    def synthesize(self, problem: Problem, subtasks: list[str], results: list[str]) -> str:
        views = [self.result_view(r) for r in results]
        return f"Q:{problem.compact}\nR:{';'.join(views)}\nA:"

    def result_view(self, completion: str) -> str:
        return self.kind.result_view(completion)

    def parse_subtasks(self, text: str, limit: int) -> list[str]:
        parts = [p.strip() for p in text.split(";")]
        return [p for p in parts if p][:limit]

    def parse_verdict(self, text: str) -> bool | None:
        word = text.strip().lower()
        if word.startswith("yes"):
            return True
        if word.startswith("no"):
            return False
        return None

    def parse_choice(self, text: str, n: int) -> int | None:
        return _parse_choice(text, n)


class ChatPrompts:
    """Natural-language role instructions for chat models (Qwen3, thinking disabled)."""

    family = "chat"

    def __init__(self, task: str, tokenizer):
        self.task = task
        self.kind = task_class(task)  # what is specific to the task: views, rules
        self.tokenizer = tokenizer

    def _chat(self, system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
        )

    def _answer_rule(self) -> str:
        return self.kind.answer_rule

    def solve(self, problem: Problem, variant: int = 0) -> str:
        opener = CHAT_OPENERS[variant % len(CHAT_OPENERS)]
        return self._chat(
            "You are a careful expert problem solver.",
            f"{opener}\n\n{problem.question}\n\n{self._answer_rule()}",
        )

    def aggregate(self, problem: Problem, candidates: list[str]) -> str:
        listed = "\n\n".join(
            f"Solution {i + 1}:\n{self.kind.candidate_view(c)}" for i, c in enumerate(candidates)
        )
        rule = self.kind.aggregate_rule
        return self._chat(
            "You aggregate the answers of several solvers into one final answer.",
            f"Problem:\n{problem.question}\n\nCandidate solutions:\n\n{listed}\n\n{rule}",
        )

    def evaluate(self, problem: Problem, candidate: str) -> str:
        return self._chat(
            "You are a strict reviewer. Check the proposed solution carefully.",
            f"Problem:\n{problem.question}\n\nProposed solution:\n{candidate}\n\n"
            "Give a brief critique, then end with exactly one line: "
            "VERDICT: ACCEPT or VERDICT: REJECT.",
        )

    def revise(self, problem: Problem, candidate: str, feedback: str, variant: int = 0) -> str:
        return self._chat(
            "You are a careful expert problem solver who fixes mistakes.",
            f"Problem:\n{problem.question}\n\nYour previous attempt:\n{candidate}\n\n"
            f"A reviewer rejected it:\n{feedback}\n\nWrite a corrected solution. "
            f"{self._answer_rule()}",
        )

    def orchestrate(self, problem: Problem, max_subtasks: int) -> str:
        return self._chat(
            "You plan work for a team. You do not solve the problem yourself.",
            f"Problem:\n{problem.question}\n\nSplit it into at most {max_subtasks} independent "
            "subtasks that workers can solve separately. Write one per line as "
            "'SUBTASK: <description>' and nothing else.",
        )

    def work(self, problem: Problem, subtask: str) -> str:
        return self._chat(
            "You are a worker solving one part of a larger problem.",
            f"Overall problem (for context):\n{problem.question}\n\nYour subtask:\n{subtask}\n\n"
            "Solve only your subtask and state its result clearly.",
        )

    def synthesize(self, problem: Problem, subtasks: list[str], results: list[str]) -> str:
        listed = "\n\n".join(
            f"Subtask {i + 1}: {s}\nResult: {r}" for i, (s, r) in enumerate(zip(subtasks, results))
        )
        return self._chat(
            "You combine the workers' results into the final solution.",
            f"Problem:\n{problem.question}\n\nWorkers' results:\n\n{listed}\n\n"
            f"Write the final solution. {self._answer_rule()}",
        )

    def result_view(self, completion: str) -> str:
        return completion.strip()

    def parse_subtasks(self, text: str, limit: int) -> list[str]:
        return [s for s in _SUBTASK_LINE.findall(text) if s][:limit]

    def parse_verdict(self, text: str) -> bool | None:
        lines = _VERDICT_LINE.findall(text)
        if lines:
            return lines[-1].upper() == "ACCEPT"
        yes, no = _VERDICT_YES.search(text), _VERDICT_NO.search(text)
        if yes and not no:
            return True
        if no and not yes:
            return False
        return None

    def parse_choice(self, text: str, n: int) -> int | None:
        return _parse_choice(text, n)


def _parse_choice(text: str, n: int) -> int | None:
    """A 1-based candidate number from `\\boxed{k}` (or the last number); None if out of range."""
    boxed = extract_boxed(text)
    numbers = _CHOICE.findall(boxed if boxed is not None else text)
    if not numbers:
        return None
    k = int(numbers[-1])
    return k - 1 if 1 <= k <= n else None


Prompts = TinyPrompts | ChatPrompts
