"""The statistics across seeds of one experiment: what its statistics page
and `GET /api/v1/experiments/<id>/stats` show, and the plan behind "queue more seeds".

The maths is `analysis.stats` (torch-free, seeded, so the same runs give the same numbers on
every request); this module only chooses the runs, feeds it their stored series and puts the
answers into words.

Which runs count: the experiment's own runs (branches, which continue a parent with a change,
are left out, and so are runs an MLflow client deleted: `webapp/runs/lifecycle.py`) that
*succeeded*. A queued or running run has no final numbers yet: it is
pending, and counts towards the seeds a cell already has on the way. A failed or cancelled run
stopped somewhere arbitrary, so its "final" means nothing: it is left out and counted. Two
finished runs claiming one place (same cell and seed: external runs can) keep the older.

- `experiment_stats(experiment)` → a JSON-able dict: `runs` (what was counted and what was
  not, and why), `sharing` (`analysis.stats.paired_effect` of per_role − shared on peak, final
  and cliff, each cell with its `plan`), `main_effects`, `lead` (`analysis.stats.lead_test`
  plus `n_cliffs`, `n_no_onset`, `histogram`) and `verdicts` (sentences built from the
  numbers). Cached in the process by the content of what it was computed from.
- `seed_plan` / `queue_more_seeds(experiment)`: per undecided cell, the seeds
  `more_needed` says are missing, less those already pending; at most `MAX_QUEUE` runs a call.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from analysis.runs import RunSummary
from analysis.stats import MIN_SEEDS, lead_inputs, lead_test, main_effects, paired_effect
from trainer.config import ConfigError, config_from_dict
from vocabulary.names import CELL_AXES, GRAD_NORM, PER_ROLE, SHARED, role_key
from webapp.experiments.models import Experiment, Run
from webapp.metrics import series_of
from webapp.runs.lifecycle import live_runs
from webapp.runs.queueing import new_run, send_runs
from webapp.runs.seeds import seed_status
from webapp.runs.summaries import run_summaries

AXES = CELL_AXES
PAIR_AXES = tuple(a for a in CELL_AXES if a != "sharing")  # a cell of the sharing table
FIRST, SECOND = SHARED, PER_ROLE  # the effect is SECOND − FIRST
METRICS = ("peak", "final", "cliff")
METRIC_NAMES = {"peak": "peak accuracy", "final": "final accuracy", "cliff": "cliff rate"}
MAX_QUEUE = 50  # runs one press of "queue more seeds" may queue: a slip costs hours, not days
HISTOGRAM_BINS = 12

_CACHE_SIZE = 64
_cache: OrderedDict[str, dict] = OrderedDict()
_cache_lock = threading.Lock()


# --- choosing the runs -------------------------------------------------------------------------


def _runs(experiment: Experiment, *, deleted_too: bool = False) -> list[Run]:
    """The experiment's runs; those an MLflow client deleted only with `deleted_too`."""
    fields = (
        "id",
        "experiment_id",
        "status",
        "seed",
        "external",
        "parent_id",
        "total_steps",
        *AXES,
    )
    runs = experiment.runs.all() if deleted_too else live_runs(experiment.runs.all())
    return list(runs.only(*fields).order_by("id"))


def _cell(run: Run) -> dict[str, str]:
    return {axis: getattr(run, axis) for axis in AXES}


def _sort_runs(runs: list[Run]) -> dict[str, Any]:
    """Split the experiment's runs into counted (succeeded, one per place), pending and the
    rest, with the reason each was left out."""
    counted, pending = [], []
    places: dict[tuple, int] = {}
    left_out = {"failed": 0, "cancelled": 0, "branches": 0, "duplicates": []}
    for run in runs:
        if run.parent_id is not None:
            left_out["branches"] += 1
        elif run.status in Run.ACTIVE:
            pending.append(run)
        elif not seed_status(run.status):  # failed, cancelled: webapp/runs/seeds.py
            left_out[run.status] = left_out.get(run.status, 0) + 1
        else:
            place = (*_cell(run).values(), run.seed)
            if place in places:
                left_out["duplicates"].append({"run": run.id, "same_as": places[place]})
            else:
                places[place] = run.id
                counted.append(run)
    return {"counted": counted, "pending": pending, "left_out": left_out}


# --- the amplification onsets' steps ---------------------------------------------------------


def _lead_entries(runs: list[Run], summaries: dict[int, dict]) -> tuple[list[dict], int, int]:
    """`lead_test` inputs of the runs with a cliff, the number of runs with a cliff, and how
    many of those have no amplification onset. Only the earliest-amplifying role's grad_norm
    steps are read, in one query for all runs."""
    wanted: dict[int, str] = {}
    n_cliffs = n_no_onset = 0
    for run in runs:
        summary = RunSummary.of(summaries.get(run.id))
        if summary.accuracy.cliff_onset is None:
            continue
        n_cliffs += 1
        onsets = {r: s for r, s in summary.amplification.items() if s is not None}
        if not onsets:
            n_no_onset += 1
            continue
        role = min(sorted(onsets), key=lambda r: onsets[r])  # lead_inputs' own choice
        wanted[run.id] = role_key(role, GRAD_NORM)
    series = series_of(wanted)
    entries = []
    for run in runs:
        if run.id in wanted:
            entry = lead_inputs(series[run.id], summaries[run.id])
            entries.append({**entry, "run": run.id})
    return entries, n_cliffs, n_no_onset


# --- the statistics ----------------------------------------------------------------------------


def experiment_stats(experiment: Experiment) -> dict[str, Any]:
    """Everything the statistics page and API show for the experiment (see the module
    docstring); the same runs and points give the same dict."""
    all_runs = _runs(experiment)
    sorted_runs = _sort_runs(all_runs)
    counted, pending = sorted_runs["counted"], sorted_runs["pending"]
    summaries = run_summaries(counted)
    entries = [
        {"cell": _cell(run), "seed": run.seed, "summary": summaries.get(run.id)} for run in counted
    ]
    leads, n_cliffs, n_no_onset = _lead_entries(counted, summaries)
    pending_places = sorted((*_cell(r).values(), r.seed) for r in pending)
    key = _cache_key(experiment.id, entries, leads, pending_places, sorted_runs["left_out"])
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return json.loads(_cache[key])  # a copy: callers may decorate theirs

    sharing = paired_effect(entries, first=FIRST, second=SECOND, metrics=METRICS, axes=AXES)
    for cell in sharing["cells"]:
        cell["plan"] = _cell_plan(cell, pending)
        # Which metrics are open: a cell decided on peak and final but not on its cliff rate
        # is "undecided on cliff rate", never a blanket "undecided".
        cell["undecided_on"] = [m for m in METRICS if cell[m]["decision"] == "undecided"]
        cell["undecided"] = bool(cell["undecided_on"])
        # Fewer than MIN_SEEDS pairs: no interval and no verdict, only "not enough data".
        cell["insufficient"] = cell["n_pairs"] < MIN_SEEDS
    lead = lead_test(leads)
    lead.update(
        n_cliffs=n_cliffs,
        n_no_onset=n_no_onset,
        histogram=lead_histogram(lead["leads"]),
        runs=[e["run"] for e in leads],
    )
    stats = {
        "experiment": experiment.id,
        "runs": {
            "total": len(all_runs),
            "counted": len(counted),
            "pending": len(pending),
            "left_out": sorted_runs["left_out"],
        },
        "sharing": sharing,
        "main_effects": main_effects(entries, metrics=METRICS, axes=AXES),
        "lead": lead,
    }
    stats["state"] = _state(stats)
    _one_answer(stats)
    stats["plan"] = _plan_totals(sharing["cells"])
    stats["verdicts"] = {"sharing": sharing_sentence(stats), "lead": lead_sentence(lead)}
    with _cache_lock:
        _cache[key] = json.dumps(stats)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return stats


def _one_answer(stats: dict) -> None:
    """One question, one answer per page: where the sharing table pairs runs by seed, the
    Main effects rows of the sharing axis defer to it — no second, unpaired interval that
    could say "decided" beside its "undecided", or pool cells it found to disagree. Only for
    an axis of exactly the two paired levels; each row keeps its mean and effect."""
    rows_by_metric = stats["main_effects"].get("sharing") or {}
    if stats["state"] != "ok":
        return
    for m, rows in rows_by_metric.items():
        if {row["level"] for row in rows} != {FIRST, SECOND}:
            continue
        paired = stats["sharing"]["overall"][m]
        for row in rows:
            row.update(low=None, high=None, decision="paired")
            row["verdict"] = f"paired by seed above: {paired['verdict']}"


def _cache_key(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _state(stats: dict) -> str:
    """What the sharing table can show: "no_runs" (nothing finished), "no_pairs" (finished
    runs but no per_role/shared pair of one seed) or "ok"."""
    if not stats["runs"]["counted"]:
        return "no_runs"
    if not stats["sharing"]["cells"]:
        return "no_pairs"
    return "ok"


# --- seeds to queue ----------------------------------------------------------------------------


def _cell_plan(cell: dict, pending: Sequence[Run]) -> dict[str, Any]:
    """How many more seeds (pairs) the cell wants: the largest `more_needed` of its undecided
    or insufficient metrics (fewer than MIN_SEEDS pairs: up to MIN_SEEDS at least), less the
    seeds it already has queued or running."""
    undecided = [m for m in METRICS if cell[m]["decision"] in ("undecided", "insufficient")]
    estimates = [cell[m]["more_needed"] for m in undecided if cell[m]["more_needed"] is not None]
    on_the_way = {
        r.seed
        for r in pending
        if r.sharing in (FIRST, SECOND) and all(getattr(r, a) == cell[a] for a in PAIR_AXES)
    } - set(cell["seeds"])
    plan: dict[str, Any] = {"wanted": None, "pending": len(on_the_way), "to_queue": 0}
    if not undecided:
        plan["reason"] = "decided"
        return plan
    if not estimates:
        plan["reason"] = "no difference observed: seeds needed cannot be estimated"
        return plan
    plan["wanted"] = max(estimates)
    plan["to_queue"] = max(0, plan["wanted"] - plan["pending"])
    if not plan["to_queue"]:
        plan["reason"] = "enough seeds queued or running"
    elif cell["n_pairs"] < MIN_SEEDS:
        plan["reason"] = f"not enough data: fewer than {MIN_SEEDS} seeds"
    else:
        plan["reason"] = "undecided"
    return plan


def _plan_totals(cells: list[dict]) -> dict[str, int]:
    seeds = sum(c["plan"]["to_queue"] for c in cells)
    return {
        "undecided_cells": sum(1 for c in cells if c["undecided"]),
        "insufficient_cells": sum(1 for c in cells if c["insufficient"]),
        "seeds": seeds,
        "runs": 2 * seeds,
        "max_runs": MAX_QUEUE,
    }


def queue_more_seeds(experiment: Experiment) -> dict[str, Any]:
    """Queue the seeds the undecided cells want, both sharing modes, with the next seed
    numbers unused in the cell, through `queueing` (sent once the transaction commits).

    Each new run copies the config of a run of its cell and sharing mode trained here, with
    the new seed. At most MAX_QUEUE runs; cells are served in table order. Returns
    `{"queued": [run ids], "cells": [{axes, "seeds"}], "wanted_runs", "capped", "skipped":
    [{axes, "reason"}]}`.
    """
    with transaction.atomic():
        # One press at a time per experiment: a second waits, then sees the first's runs as
        # pending and queues only what is still missing.
        Experiment.objects.select_for_update().filter(id=experiment.id).first()
        return _queue_more_seeds(experiment)


def _queue_more_seeds(experiment: Experiment) -> dict[str, Any]:
    stats = experiment_stats(experiment)
    # New seeds skip those of deleted runs too: restored, they would claim the same places.
    runs = _runs(experiment, deleted_too=True)
    templates: dict[tuple, Run] = {}
    for run in live_runs(
        Run.objects.filter(
            experiment=experiment, parent__isnull=True, external=False, status=Run.SUCCEEDED
        )
    ).order_by("id"):
        templates[tuple(getattr(run, a) for a in AXES)] = run
    out: dict[str, Any] = {"queued": [], "cells": [], "skipped": [], "capped": False}
    out["wanted_runs"] = stats["plan"]["runs"]
    budget = MAX_QUEUE
    new: list[Run] = []
    for cell in stats["sharing"]["cells"]:
        want = cell["plan"]["to_queue"]
        if not want:
            continue
        axes = {a: cell[a] for a in PAIR_AXES}
        sources = [templates.get((*axes.values(), sharing)) for sharing in (FIRST, SECOND)]
        if None in sources:
            out["skipped"].append({**axes, "reason": "no run of this cell was trained here"})
            continue
        take = min(want, budget // 2)
        if take < want:
            out["capped"] = True
        if not take:
            continue
        used = [r.seed for r in runs if all(getattr(r, a) == v for a, v in axes.items())]
        seeds = list(range(max(used, default=-1) + 1, max(used, default=-1) + 1 + take))
        try:
            configs = [
                config_from_dict({**source.config, "seed": seed})
                for seed in seeds
                for source in sources
            ]
        except ConfigError as exc:
            fields = ", ".join(f"{k}: {v}" for k, v in exc.errors.items())
            out["skipped"].append({**axes, "reason": f"its stored config is invalid ({fields})"})
            continue
        new += [new_run(experiment, config) for config in configs]
        budget -= len(configs)
        out["cells"].append({**axes, "seeds": seeds})
    if new:
        created = Run.objects.bulk_create(new)
        transaction.on_commit(lambda: send_runs(created))
        out["queued"] = [run.id for run in created]
    return out


# --- words and pictures ------------------------------------------------------------------------


def _number(x: float) -> str:
    """A step count as a whole number when it is one."""
    text = str(int(x)) if float(x).is_integer() else f"{x:.1f}"
    return text.replace("-", "−")


def _signed(x: float) -> str:
    """+0.041 / −0.012, with a true minus sign as on the page's tables."""
    return f"{x:+.3f}".replace("-", "−")


def seed_list(seeds: Sequence[int]) -> str:
    """ "seed 4", "seeds 4–19" for a run of consecutive seeds, else "seeds 4, 7, 9"."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def _percent(p: float) -> str:
    if p < 0.001:
        return "less than 0.1%"
    return f"{p:.0%}" if p >= 0.1 else f"{p:.1%}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def lead_sentence(lead: dict) -> str:
    """The reviewer's test in one plain sentence (or two), from `lead_test` plus `n_cliffs`
    and `n_no_onset`."""
    n_cliffs = lead["n_cliffs"]
    if not n_cliffs:
        return "No finished run has a cliff, so there is nothing to test yet."
    if not lead["n"]:
        return (
            f"{_plural(n_cliffs, 'finished run')} had a cliff, but none showed gradient "
            "amplification, so whether amplification comes first cannot be tested yet."
        )
    n, k = lead["n"], lead["n_precede"]
    runs = "run" if n == 1 else "runs"
    said = (
        f"Among {n} {runs} with a cliff, amplification preceded it in {k} "
        f"(median lead {_number(lead['lead_median'])} steps); placing onsets at random "
        f"steps gives this or more {_percent(lead['p_fraction_exact'])} of the time"
    )
    if lead["decision"] == "precedes":
        said += ": amplification tends to come first."
    else:
        said += ": not distinguishable from chance with these runs."
    if lead["n_no_onset"]:
        more = lead["n_no_onset"]
        said += (
            f" {_plural(more, 'more run')} with a cliff showed no amplification and "
            f"{'is' if more == 1 else 'are'} left out."
        )
    return said


def sharing_sentence(stats: dict) -> str:
    """What the sharing table says overall, in words."""
    if stats["state"] == "no_runs":
        pending = stats["runs"]["pending"]
        return "No run has succeeded yet" + (
            f" ({_plural(pending, 'run')} queued or running)." if pending else "."
        )
    if stats["state"] == "no_pairs":
        return (
            f"No {SECOND}/{FIRST} pairs yet: the effect of sharing needs finished runs of "
            "both modes with the same cell and seed."
        )
    sharing = stats["sharing"]
    parts = []
    for m in METRICS:
        effect = sharing["overall"][m]
        if effect["mean"] is None:
            continue
        if effect["decision"] == "no_cliffs":
            parts.append(f"{METRIC_NAMES[m]}: no cliffs in any run")
            continue
        text = f"{METRIC_NAMES[m]} {_signed(effect['mean'])}"
        if effect["low"] is not None:
            text += f" [{_signed(effect['low'])}, {_signed(effect['high'])}]"
        text += f" ({effect['verdict']})"
        parts.append(text)
    if not parts:  # no cell has the seeds for a pooled figure
        parts.append(sharing["overall"][METRICS[0]]["verdict"])
    cells = sharing["cells"]
    undecided = sum(1 for c in cells if c["undecided"] or c["insufficient"])
    n_pairs = sum(c["n_pairs"] for c in cells)
    said = (
        f"Over {_plural(n_pairs, 'pair')} in {_plural(len(cells), 'cell')}, {SECOND} − {FIRST}: "
        + "; ".join(parts)
        + "."
    )
    if undecided:
        plan = stats["plan"]
        what = (
            "Undecided"
            if not any(c["insufficient"] for c in cells)
            else ("Undecided or without enough seeds")
        )
        said += f" {what} in {undecided} of {_plural(len(cells), 'cell')}"
        open_metrics = sorted({m for c in cells for m in c["undecided_on"]}, key=METRICS.index)
        if open_metrics:
            said += " (on " + ", ".join(METRIC_NAMES[m] for m in open_metrics) + ")"
        said += ": "
        if plan["seeds"]:
            said += f"resolving them takes about {_plural(plan['seeds'], 'more seed')} "
            said += f"({plan['runs']} runs)."
        elif any(c["plan"]["pending"] for c in cells):
            said += "the seeds they need are queued or running."
        else:
            said += "no difference seen there to estimate the seeds needed from."
    else:
        said += " No cell is undecided."
    few = sum(1 for c in cells if c["insufficient"])
    if few:
        said += (
            f" Not enough data in {_plural(few, 'cell')}: fewer than {MIN_SEEDS} seeds give "
            "no interval and no verdict."
        )
    return said


def lead_histogram(leads: Sequence[float], bins: int = HISTOGRAM_BINS) -> list[dict[str, Any]]:
    """Whole-step bins of the leads, `[{"low", "high" (inclusive), "count"}]`, one edge at 0
    so that "amplification first" (lead > 0) never shares a bin with "after" (lead < 0)."""
    if not leads:
        return []
    lo, hi = math.floor(min(leads)), math.floor(max(leads))
    width = max(1, math.ceil((hi - lo + 1) / bins))
    start = math.floor(lo / width) * width
    out = []
    edge = start
    while edge <= hi:
        count = sum(1 for x in leads if edge <= x < edge + width)
        out.append({"low": edge, "high": edge + width - 1, "count": count})
        edge += width
    return out
