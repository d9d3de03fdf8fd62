"""The episode pages (server-rendered; every text escaped by the templates):

- `/runs/<id>/episodes/?kind=&step=&near=&correct=&outcome=&truncated=&q=&sort=&episode=`:
  one step's episodes as GRPO groups (a problem's samples side by side), filtered, and the
  opened episode drawn as its workflow. A click on a curve lands here with `near=1`.
- `/runs/<id>/episodes/time/?problem=&steps=&sample=`: one probe problem at the run's base,
  peak and after its cliff (or at the steps given), side by side.
- `/episodes/compare/?runs=a,b&problem=&step=&sample=`: one probe problem in several runs at
  one evaluation step (the latest they all recorded, unless given).

Anyone signed in may read every run (`webapp/runs/access.py`); others are sent to sign
in, an unknown run is a 404. A parameter that cannot be read is a 400 page naming it; a step
or problem with nothing recorded is an ordinary page that says so.
"""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from analysis.runs import RunSummary
from webapp.episodes import compare
from webapp.episodes.browse import (
    KIND_NAMES,
    MAX_RUNS_COMPARED,
    MAX_STEP_EPISODES,
    MAX_STEPS_COMPARED,
    BadQuery,
    StepFilters,
    choose_step,
    detail,
    groups,
    ids,
    problem_of,
    roles_with_shares,
    step_cards,
    whole,
)
from webapp.episodes.store import probe_problems, probe_steps, recorded_steps
from webapp.episodes.workflow import OUTCOMES
from webapp.runs.access import get_run_for_user
from webapp.runs.summaries import run_summaries


def _refuse_bad_query(view):
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except BadQuery as bad:
            context = {"name": bad.name, "expected": bad.expected, "back": request.path}
            return render(request, "episodes/bad_query.html", context, status=400)

    return wrapper


def _link(path: str, **params) -> str:
    kept = {k: v for k, v in params.items() if v is not None and v != "" and v is not False}
    return f"{path}?{urlencode(kept)}" if kept else path


@login_required
@_refuse_bad_query
def step_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    query = request.GET
    filters = StepFilters.read(query)
    opened_id = whole(query, "episode")
    recorded = recorded_steps(run.id)
    chosen = choose_step(query, recorded)
    everything = [] if chosen.empty else step_cards(run.id, chosen.kind, chosen.step)
    shown = groups(everything, filters)
    kept = [card for group in shown for card in group.cards if card.shown]
    opened = next((c for c in everything if c.id == opened_id), None) or (kept[0] if kept else None)
    siblings = [c for c in everything if opened and c.problem_id == opened.problem_id]
    base = request.path
    here = {
        "kind": chosen.kind,
        "step": chosen.step,
        "correct": query.get("correct"),
        "outcome": filters.outcome,
        "truncated": "1" if filters.truncated else None,
        "q": filters.q,
        "sort": filters.sort,
    }
    accuracy = RunSummary.of(run_summaries([run], gradients=False).get(run.id)).accuracy
    marks = [("peak", accuracy.peak_step), ("cliff onset", accuracy.cliff_onset)]
    context = {
        "run": run,
        "landmarks": [
            {
                "label": f"{label} (step {step:g})",
                "eval": _link(base, kind="eval", step=round(step), near=1),
                "train": _link(base, kind="train", step=round(step), near=1),
            }
            for label, step in marks
            if step is not None and recorded
        ],
        "recorded": [
            {"kind": k, "step": s, "label": f"{s} · {KIND_NAMES[k]}"} for k, s in recorded
        ],
        "chosen": chosen,
        "kind_name": KIND_NAMES.get(chosen.kind or "", "recorded"),
        "filters": filters,
        "outcomes": OUTCOMES,
        "share_roles": roles_with_shares(everything),
        "groups": shown,
        "total": len(everything),
        "capped": len(everything) >= MAX_STEP_EPISODES,
        "kept": len(kept),
        "opened": detail(opened) if opened else None,
        "siblings": siblings,
        "around": [
            {"label": f"{s} · {KIND_NAMES[k]}", "href": _link(base, kind=k, step=s)}
            for k, s in chosen.around
        ],
        "time_link": _link(
            reverse("run_episodes_time", args=[run.id]),
            problem=opened.problem_id if opened and opened.kind == "eval" else None,
        ),
    }
    for card in everything:
        card.href = _link(base, **here, episode=card.id) + "#episode"
    return render(request, "episodes/step.html", context)


def _link_samples(path: str, columns: list[compare.Column], **params) -> None:
    """Each column's sample chips open that sample in every column."""
    for col in columns:
        for card in col.samples:
            card.href = _link(path, **params, sample=card.sample)


@login_required
@_refuse_bad_query
def time_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    query = request.GET
    problems = probe_problems(run.id)
    problem = problem_of(query) or (problems[0] if problems else None)
    asked = ids(query, "steps", MAX_STEPS_COMPARED)
    sample = whole(query, "sample", 10_000) or 0
    steps = probe_steps(run.id, problem) if problem else []
    if asked:
        marks = [(f"step {s}", s if s in steps else None) for s in asked]
        missing = [s for s in asked if s not in steps]
    else:
        marks, missing = compare.landmarks(run, steps), []
    columns = [compare.column(label, run, problem, step, sample) for label, step in marks]
    _link_samples(request.path, columns, problem=problem, steps=",".join(map(str, asked)))
    context = {
        "run": run,
        "problems": problems,
        "problem": problem,
        "steps": steps,
        "asked": ",".join(map(str, asked)),
        "missing": missing,
        "sample": sample,
        "columns": columns,
        "compare_link": _link(reverse("episodes_compare"), runs=str(run.id), problem=problem),
    }
    return render(request, "episodes/time.html", context)


@login_required
@_refuse_bad_query
def runs_page(request: HttpRequest) -> HttpResponse:
    query = request.GET
    run_ids = ids(query, "runs", MAX_RUNS_COMPARED)
    runs = [get_run_for_user(request.user, run_id) for run_id in run_ids]
    step = whole(query, "step")
    sample = whole(query, "sample", 10_000) or 0
    problems = [probe_problems(run.id) for run in runs]
    common = [p for p in problems[0] if all(p in other for other in problems[1:])] if runs else []
    problem = problem_of(query) or (common[0] if common else None)
    by_run = {run.id: probe_steps(run.id, problem) if problem else [] for run in runs}
    shared = sorted(set.intersection(*(set(s) for s in by_run.values()))) if runs else []
    if step is None and shared:
        step = shared[-1]  # the latest evaluation every run recorded
    columns = [
        compare.column(
            f"run {run.id}" + (f" · {run.sharing}" if run.sharing else ""),
            run,
            problem,
            step if step in by_run[run.id] else None,
            sample,
        )
        for run in runs
    ]
    _link_samples(
        request.path, columns, runs=",".join(map(str, run_ids)), problem=problem, step=step
    )
    context = {
        "runs": runs,
        "runs_value": ",".join(str(r.id) for r in runs),
        "problems": common,
        "problem": problem,
        "step": step,
        "shared_steps": shared,
        "sample": sample,
        "columns": columns,
    }
    return render(request, "episodes/compare.html", context)
