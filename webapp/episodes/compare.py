"""One probe problem side by side: in one run at its landmarks (base, peak, after the cliff),
or in several runs at one step.

Evaluations record the same probe problems every time (`episodes_probe`), so a problem can be
followed from the base model through the peak to the cliff. The landmarks come from the run's
summary (`webapp/runs/summaries.py`, the same `analysis` verdict every page shows),
each snapped to the nearest evaluation that recorded the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.runs import RunSummary
from webapp.episodes.browse import Card, cards, detail, nearest
from webapp.episodes.models import Episode
from webapp.episodes.store import Filters, select
from webapp.experiments.models import Run
from webapp.runs.summaries import run_summaries


def landmarks(run: Run, steps: list[int]) -> list[tuple[str, int]]:
    """(label, recorded step) for the base, the peak, and after the cliff (or the last
    evaluation when the run has no cliff), from the run's summary; landmarks that fall on one
    recorded step share its column."""
    if not steps:
        return []
    accuracy = RunSummary.of(run_summaries([run], gradients=False).get(run.id)).accuracy
    marks = [("base", steps[0])]
    peak, cliff = accuracy.peak_step, accuracy.cliff_onset
    if peak is not None:
        marks.append((f"peak (step {peak:g})", nearest(steps, int(peak))))
    if cliff is not None:
        after = [s for s in steps if s >= cliff]
        label = f"after the cliff (onset {cliff:g})"
        marks.append((label, after[0] if after else steps[-1]))
    else:
        marks.append(("last evaluation", steps[-1]))
    seen: dict[int, list[str]] = {}
    for label, step in marks:
        seen.setdefault(step, []).append(label)
    return [(" · ".join(labels), step) for step, labels in seen.items()]


@dataclass
class Column:
    title: str
    run: Run
    step: int | None
    samples: list[Card]
    opened: dict[str, Any] | None  # `detail` of the chosen sample

    @property
    def right(self) -> int:
        return sum(c.correct for c in self.samples)


def column(title: str, run: Run, problem: str, step: int | None, sample: int) -> Column:
    """The problem's recorded samples at one evaluation, `sample` drawn as its workflow (the
    first when that sample was not recorded)."""
    if step is None:
        return Column(title, run, None, [], None)
    found = cards(select(run.id, Filters(kind=Episode.EVAL, step=step, problem=problem))[:64])
    chosen = next((c for c in found if c.sample == sample), found[0] if found else None)
    return Column(title, run, step, found, detail(chosen) if chosen else None)
