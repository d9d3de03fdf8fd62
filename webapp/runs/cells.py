"""An external run's matrix cell, seed and planned length, read from what its client sent.

Troupe's own runs take these columns from a validated config (`trainer.config`). An external
run has only a free-form config — the JSON API's `config` object, or the MLflow endpoint's
tags and params — and both read it here, by one rule (`run_columns`):

- an axis (`vocabulary.names.CELL_AXES`) given with any value other than None is that value as
  text; text longer than its column is a problem, and is cut to the column;
- the seed and the step count are whole numbers: an integer, or its decimal digits as text
  (MLflow sends every param as text); anything else is not a seed (the column keeps its
  default, 0); a whole number outside 0 … 2³¹ − 1 is a problem and is not used;
- the step count is the first of `steps_fields` that holds a positive whole number (0 means
  "not said", as the column's default does).

What a problem costs is the caller's: the JSON API answers 400 naming `config.<field>`; the
MLflow endpoint, which must not refuse a tag MLflow itself accepts, keeps what fits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.config import INT_MAX
from vocabulary.names import CELL_AXES
from webapp.experiments.models import Run

_WHOLE = re.compile(r"-?[0-9]+")
OUT_OF_RANGE = f"a whole number from 0 to {INT_MAX}"


@dataclass(frozen=True)
class RunColumns:
    cell: dict[str, str]  # the axes given, as text that fits their columns
    seed: int | None  # None: no usable seed was given
    total_steps: int | None  # None: no usable step count was given
    problems: dict[str, str] = field(default_factory=dict)  # field → what is wrong with it


def whole_number(value: Any) -> int | None:
    """An int (not a bool) or its decimal digits as text, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    return None


def run_columns(values: Mapping[str, Any], steps_fields: Sequence[str] = ("steps",)) -> RunColumns:
    """The cell, seed and step count `values` give, by the rule of the module docstring."""
    cell: dict[str, str] = {}
    problems: dict[str, str] = {}
    for axis in CELL_AXES:
        if values.get(axis) is None:
            continue
        text = str(values[axis])
        limit = Run._meta.get_field(axis).max_length
        if len(text) > limit:
            problems[axis] = f"at most {limit} characters"
        cell[axis] = text[:limit]
    seed = whole_number(values.get("seed"))
    if seed is not None and not 0 <= seed <= INT_MAX:
        problems["seed"], seed = OUT_OF_RANGE, None
    total_steps = None
    for name in steps_fields:
        steps = whole_number(values.get(name))
        if steps is None or steps == 0:
            continue
        if not 0 < steps <= INT_MAX:
            problems[name] = OUT_OF_RANGE
            continue
        total_steps = steps
        break
    return RunColumns(cell, seed, total_steps, problems)
