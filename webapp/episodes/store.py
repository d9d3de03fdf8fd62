"""Every read and write of recorded episodes: compressed, idempotent, bounded per run.

The workers' database reporter hands the trainer's episode records (`trainer/episode_log.py`)
to `write_episodes` with each flush, inside the same transaction as the step's points. An
episode is unique on (run, kind, step, index): a batch replayed after a lost answer from the
database, or written again by a resumed run, is skipped row by row (`ignore_conflicts`, an
`ON CONFLICT DO NOTHING` on PostgreSQL, `INSERT OR IGNORE` on SQLite), never duplicated. A
resumed run first drops what an earlier attempt stored past its checkpoint
(`delete_from`), as it does for points, so what is stored is what the finished run scored.

Bounded: a run keeps at most `MAX_EPISODES_PER_RUN` episodes (the paper preset records about
8,200: 500 steps × 2 problems × 8 samples and 51 evaluations × 4 probe problems); past that,
new ones are dropped. Each text was cut at 32,000 characters by the trainer.

A record is stored as UTF-8 JSON compressed with zlib (`webapp/episodes/codec.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet

from webapp.episodes.codec import finite, pack, unpack
from webapp.episodes.models import Episode

MAX_EPISODES_PER_RUN = 20_000


def _row(run_id: int, record: dict[str, Any]) -> Episode:
    return Episode(
        run_id=run_id,
        kind=record["kind"],
        step=int(record["step"]),
        index=int(record["index"]),
        problem_id=str(record["problem_id"])[:200],
        sample=int(record.get("sample", 0)),
        correct=bool(record.get("correct")),
        reward=finite(record.get("reward")),
        turns=len(record.get("turns", ())),
        data=pack(record),
    )


def write_episodes(run_id: int, records: Iterable[dict[str, Any]]) -> int:
    """Store the records of one run that are not stored yet, up to the run's bound; how many
    rows were offered to the database (replays among them are skipped there)."""
    rows = [_row(run_id, record) for record in records]
    if not rows:
        return 0
    room = MAX_EPISODES_PER_RUN - Episode.objects.filter(run_id=run_id).count()
    rows = rows[: max(room, 0)]
    Episode.objects.bulk_create(rows, batch_size=200, ignore_conflicts=True)
    return len(rows)


def delete_from(run_id: int, step: int) -> None:
    """Forget the run's episodes of `step` and later (a resumed run records them again)."""
    Episode.objects.filter(run_id=run_id, step__gte=step).delete()


@dataclass(frozen=True)
class Filters:
    step: int | None = None
    kind: str | None = None
    correct: bool | None = None
    problem: str | None = None
    q: str | None = None  # case-insensitive, in the problem id, answer and completions


def select(run_id: int, filters: Filters) -> QuerySet[Episode]:
    """The run's episodes matching every column filter, in (step, kind, index) order."""
    rows = Episode.objects.filter(run_id=run_id)
    if filters.step is not None:
        rows = rows.filter(step=filters.step)
    if filters.kind is not None:
        rows = rows.filter(kind=filters.kind)
    if filters.correct is not None:
        rows = rows.filter(correct=filters.correct)
    if filters.problem is not None:
        rows = rows.filter(problem_id=filters.problem)
    return rows.order_by("step", "kind", "index")


def matches(record: dict[str, Any], q: str) -> bool:
    needle = q.casefold()
    texts = [record.get("problem_id") or "", record.get("answer") or ""]
    texts += [turn.get("completion") or "" for turn in record.get("turns", ())]
    return any(needle in text.casefold() for text in texts)


def episode_json(row: Episode, record: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stored record with the row's id first."""
    return {"id": row.id, **(record if record is not None else unpack(row.data))}


def records(rows: QuerySet[Episode], q: str | None = None) -> Iterator[dict[str, Any]]:
    """The episodes of `rows` as JSON dicts, those matching `q` when given, streamed."""
    for row in rows.iterator(chunk_size=200):
        record = unpack(row.data)
        if q is None or matches(record, q):
            yield episode_json(row, record)


def recorded_steps(run_id: int) -> list[tuple[str, int]]:
    """(kind, step) of every step of the run that recorded episodes, by step then kind."""
    pairs = Episode.objects.filter(run_id=run_id).values_list("kind", "step").distinct()
    return sorted(pairs.order_by(), key=lambda pair: (pair[1], pair[0]))


def counts(run_id: int) -> dict[str, int]:
    """{kind: how many episodes of that kind the run recorded}."""
    rows = Episode.objects.filter(run_id=run_id).values("kind").annotate(n=Count("id"))
    return {row["kind"]: row["n"] for row in rows.order_by()}


def probe_problems(run_id: int, limit: int = 2000) -> list[str]:
    """The problems the run's evaluations recorded, in the order they were first recorded
    (every evaluation records the same ones: the first evaluations name them all)."""
    rows = Episode.objects.filter(run_id=run_id, kind=Episode.EVAL).order_by("step", "index")
    return list(dict.fromkeys(rows.values_list("problem_id", flat=True)[:limit]))


def probe_steps(run_id: int, problem: str) -> list[int]:
    """The evaluation steps that recorded `problem`, in order (the `episode_problem` index)."""
    rows = Episode.objects.filter(run_id=run_id, problem_id=problem, kind=Episode.EVAL)
    return sorted(set(rows.values_list("step", flat=True)))
