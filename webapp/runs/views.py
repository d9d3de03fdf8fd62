"""The experiment and run pages, and the small JSON documents their scripts poll.

Every page needs a login; anyone signed in reads everything, only the owner or staff change
things (`access.py`). Actions are POSTs that redirect back with a message.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Case, Count, F, Q, Sum, When
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from analysis.runs import RunSummary
from trainer.config import FIELDS, PRESETS, ConfigError, field_help
from vocabulary.names import (
    ACCURACY_KEY,
    REWARD_KEY,
    VERDICT_DISAGREEMENT_RATE,
    role_key,
    roles_in,
)
from webapp.experiments.models import Experiment, Run
from webapp.ids import whole_number
from webapp.metrics import latest_points, read_series
from webapp.runs import queueing, verdict_words
from webapp.runs.access import can_manage, get_experiment_for_user, get_run_for_user
from webapp.runs.forms import GROUPS, ExperimentForm, as_text, initial_for
from webapp.runs.lifecycle import live_experiments, live_run, live_runs
from webapp.runs.run_files import delete_runs
from webapp.runs.serialize import log_tail, run_json, run_label
from webapp.runs.sparkline import sparkline
from webapp.runs.summaries import cell_summaries, run_summaries

SPARKLINE_KEYS = (ACCURACY_KEY, REWARD_KEY)
SPARKLINE_POINTS = 120


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    live = live_run("runs__")  # the counts and progress leave deleted runs out too
    status_counts = {
        f"n_{status}": Count("runs", filter=live & Q(runs__status=status))
        for status, _ in Run.STATUSES
    }
    experiments = (
        live_experiments(Experiment.objects.select_related("owner"))
        .annotate(
            n_runs=Count("runs", filter=live),
            **status_counts,
            steps_total=Sum("runs__total_steps", filter=live),
            # A succeeded run counts as done whatever step it stopped at (an early stop after
            # a cliff); a cancelled or failed one only as far as it trained: a run cancelled
            # while queued did no work, and counting it whole showed 50% of nothing done.
            steps_done=Sum(
                Case(
                    When(runs__status=Run.SUCCEEDED, then=F("runs__total_steps")),
                    default=F("runs__step"),
                ),
                filter=live,
            ),
        )
        .order_by("-created", "-id")
    )
    page = Paginator(experiments, 50).get_page(request.GET.get("page"))
    for experiment in page:
        total = experiment.steps_total or 0
        experiment.percent = round(100 * (experiment.steps_done or 0) / total) if total else 0
    return render(request, "runs/list.html", {"page": page})


@login_required
def experiment_new(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        form = ExperimentForm(initial=_initial(request))
        return render(request, "runs/new.html", {"form": form})
    form = ExperimentForm(request.POST)
    if form.is_valid():
        try:  # what only storing checks: the checkpoint init_from names, the live workers
            experiment = queueing.create_experiment(
                request.user,
                form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                **form.spec,
            )
        except ConfigError as exc:
            form.refuse(exc)
        except PermissionDenied as exc:  # another user's checkpoint
            form.refuse(ConfigError({"init_from": str(exc)}))
        else:
            count = experiment.runs.count()
            messages.success(request, f"Queued {count} run{'s' if count != 1 else ''}.")
            for warning in experiment.warnings:
                messages.warning(request, warning)
            return redirect("experiment_detail", experiment.id)
    return render(request, "runs/new.html", {"form": form})


def start_reference(run: Run) -> str:
    """The checkpoint a branched run started from as the form takes it (`RUN:NAME`: its
    parent and the frozen checkpoint's name), or "" for a run that started afresh."""
    start = run.config.get("init_from") or ""
    if not start or run.parent_id is None:
        return ""
    return f"{run.parent_id}:{Path(start).name}"


def _initial(request: HttpRequest) -> dict:
    """The form's starting values: a preset, or a clone of a run or of an experiment."""
    if run_id := request.GET.get("run", "").strip():
        if (number := whole_number(run_id)) is not None:
            run = get_run_for_user(request.user, number)
            config = {k: v for k, v in run.config.items() if k in FIELDS}
            config["init_from"] = start_reference(run)  # a reference, never the server's path
            cell = {axis: [config[axis]] for axis in run.cell if config.get(axis) is not None}
            initial = initial_for("", config, cell)
            initial["seeds"] = str(run.seed)
            initial["name"] = f"{run.experiment.name} (run {run.id}, edited)"
            return initial
    if experiment_id := request.GET.get("experiment", "").strip():
        if (number := whole_number(experiment_id)) is not None:
            experiment = get_experiment_for_user(request.user, number)
            initial = initial_for(experiment.preset, experiment.base_config, experiment.matrix)
            initial["name"] = f"{experiment.name} (copy)"
            initial["description"] = experiment.description
            return initial
    preset = request.GET.get("preset", "cpu-demo")
    initial = initial_for(preset if preset in ("", *PRESETS) else "cpu-demo")
    # Switching preset reloads the page: the name and description typed so far come along
    # in the address (experiment_form.js adds them to the preset links).
    for field in ("name", "description"):
        if typed := request.GET.get(field, "").strip():
            initial[field] = typed
    return initial


@login_required
def experiment_detail(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id)
    runs = list(live_runs(experiment.runs.order_by("seed", "id")))
    summaries = run_summaries(runs, gradients=False)
    for run in runs:
        run.label = run_label(run)
        run.accuracy = RunSummary.of(summaries.get(run.id)).accuracy
    # Branches are not seeds: the matrix shows them under the root run they came from.
    branches: dict[int, list[Run]] = {}
    for run in runs:
        if run.branch_step is not None and run.parent_id is not None:
            branches.setdefault(run.parent_id, []).append(run)
    for run in runs:
        run.branches = branches.get(run.id, [])
    seeds = sorted({run.seed for run in runs if run.branch_step is None})
    by_id = {run.id: run for run in runs}
    cells = []  # the matrix table's rows: a cell's summary, its runs by seed, their ids
    for summary in cell_summaries(experiment, gradients=False):
        members = [by_id[i] for i in summary.runs if i in by_id]
        by_seed = [next((r for r in members if r.seed == s), None) for s in seeds]
        run_ids = ",".join(str(i) for i in summary.runs)
        cells.append({"summary": summary, "by_seed": by_seed, "run_ids": run_ids})
    counts = {status: 0 for status, _ in Run.STATUSES}
    for run in runs:
        counts[run.status] += 1
    context = {
        "experiment": experiment,
        "runs": runs,
        "cells": cells,
        "seeds": seeds,
        "counts": counts,
        "active": counts[Run.QUEUED] + counts[Run.RUNNING],
        "run_ids": ",".join(str(run.id) for run in runs),
        "manage": can_manage(request.user, experiment),
        "spec": _spec_rows(experiment),
    }
    return render(request, "runs/detail.html", context)


def _spec_rows(experiment: Experiment) -> list[tuple[str, str]]:
    rows = [("preset", experiment.preset or "none (defaults)")]
    rows += [(axis, ", ".join(map(str, values))) for axis, values in experiment.matrix.items()]
    rows += [(name, as_text(value)) for name, value in experiment.base_config.items()]
    return rows


@login_required
def experiment_live(request: HttpRequest, experiment_id: int) -> JsonResponse:
    experiment = get_experiment_for_user(request.user, experiment_id)
    runs = list(live_runs(experiment.runs.all()))  # the rows the page lists
    # A running run's key results move with every evaluation: the page updates them from here
    # rather than showing the numbers of its last reload (once FINAL 0.128 on the
    # experiment page while the run page said 0.091). Summaries are cached per run, so only
    # a run with new points is read again.
    active = [r for r in runs if r.status == Run.RUNNING]
    summaries = run_summaries(active, gradients=False) if active else {}
    return JsonResponse(
        {
            "runs": [
                {
                    "id": r.id,
                    "status": r.status,
                    "step": r.step,
                    "total_steps": r.total_steps,
                    "step_words": r.step_words,
                    "step_count": r.step_count,
                    "percent": r.percent,
                    "phase": r.current_phase,
                    **({"results": live_results(summaries[r.id])} if r.id in summaries else {}),
                }
                for r in runs
            ]
        }
    )


def live_results(summary: dict) -> dict:
    """A running run's key results as the experiment page writes them (the same words as
    its template: `verdict_words.cliff_label` and `cliff_line`)."""
    accuracy = RunSummary.of(summary).accuracy
    return {
        "base": accuracy.base,
        "peak": accuracy.peak,
        "peak_step": accuracy.peak_step,
        "final": accuracy.final,
        "cliff": accuracy.cliff,
        "cliff_label": verdict_words.cliff_label(accuracy),
        "cliff_line": verdict_words.cliff_line(accuracy),
        "evidence": accuracy.evidence,
    }


@login_required
@require_POST
def experiment_cancel(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id, manage=True)
    active = list(experiment.runs.filter(status__in=Run.ACTIVE))
    for run in active:
        queueing.cancel_run(run)
    messages.success(request, f"Cancelling {len(active)} run{'s' if len(active) != 1 else ''}.")
    return redirect("experiment_detail", experiment.id)


@login_required
@require_POST
def experiment_delete(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id, manage=True)
    if experiment.runs.filter(status=Run.RUNNING, external=False).exists():
        messages.error(request, "Some runs are still running: cancel them first.")
        return redirect("experiment_detail", experiment.id)
    name = experiment.name
    with transaction.atomic():
        delete_runs(experiment.runs.all())
        experiment.delete()
    messages.success(request, f"Deleted the experiment “{name}”.")
    return redirect("experiment_list")


# The run page's blocks that follow the run while it trains: run_live sends each one rendered
# by the same template as the page, so a block never reads differently live and on a reload.
LIVE_BLOCKS = {
    "facts": "runs/_run_facts.html",  # heartbeat, attempts, checkpoint, worker, error
    "results": "runs/_run_results.html",  # key results: base, peak, final, gain, cliff
    "radar": "runs/_run_radar_block.html",  # best checkpoint and events
    "lineage": "runs/_run_lineage_block.html",  # branches and the checkpoints offered
}


def _disagreement_rates(latest: dict[str, dict]) -> list[dict]:
    """Per role, the newest share of its re-checked answers the second opinion failed."""
    rows = []
    for role in roles_in(latest):
        point = latest.get(role_key(role, VERDICT_DISAGREEMENT_RATE))
        if point is not None:
            rows.append({"role": role, "value": point["value"], "step": point["step"]})
    return rows


def _run_context(request: HttpRequest, run: Run) -> dict:
    summary = run_summaries([run]).get(run.id) or {}
    latest = latest_points(run.id)
    return {
        "run": run,
        "label": run_label(run),
        "experiment": run.experiment,
        "manage": can_manage(request.user, run.experiment),
        "accuracy": summary.get("accuracy") or {},
        "summary": summary,
        "latest": latest,
        "disagreement_rates": _disagreement_rates(latest),
        "sparklines": _sparklines(run.id),
        "logs": log_tail(run.id),
    }


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    context = {
        **_run_context(request, run),
        "config_groups": _config_groups(run.config, _cut_params(run)),
        # Resume is offered only where a resume could succeed; else the page says why not.
        "resume_problem": queueing.resume_problem(run),
    }
    return render(request, "runs/run.html", context)


def _cut_params(run: Run) -> dict[str, int]:
    """{param: characters its client sent} of an MLflow run's params cut at MLflow's limit."""
    try:
        return run.tracked.cut.get("params", {})
    except ObjectDoesNotExist:  # not an MLflow run
        return {}


def _config_groups(
    config: dict, cut: dict[str, int] | None = None
) -> list[tuple[str, list[tuple[str, str, int | None]]]]:
    """[(group title, [(name, value, characters sent where the value was cut, else None)])]."""
    cut = cut or {}
    grouped: dict[str, list] = {}
    for row in field_help():
        if (name := row["name"]) in config:
            grouped.setdefault(row["group"], []).append(
                (name, as_text(config[name]), cut.get(name))
            )
    known = {row["name"] for row in field_help()}
    if extra := [(k, str(v), cut.get(k)) for k, v in sorted(config.items()) if k not in known]:
        grouped["other"] = extra
    return [(GROUPS.get(group, group.capitalize()), rows) for group, rows in grouped.items()]


def _sparklines(run_id: int) -> list[dict]:
    series = read_series(run_id, list(SPARKLINE_KEYS), SPARKLINE_POINTS)
    return [sparkline(key, series.get(key)) for key in SPARKLINE_KEYS]


@login_required
def run_live(request: HttpRequest, run_id: int) -> JsonResponse:
    """What the run page refreshes while the run is active: the run, its latest points,
    sparklines and log, and every other block of the page rendered afresh (`blocks`)."""
    run = get_run_for_user(request.user, run_id)
    context = _run_context(request, run)
    blocks = {
        name: render_to_string(template, context, request=request)
        for name, template in LIVE_BLOCKS.items()
    }
    return JsonResponse(
        {
            "run": run_json(run),
            "latest": context["latest"],
            "sparklines": context["sparklines"],
            "logs": context["logs"],
            "blocks": blocks,
        }
    )


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    status = queueing.cancel_run(run)
    if status == Run.CANCELLED:
        messages.success(request, "Cancelled.")
    elif status == Run.RUNNING:
        messages.success(request, "Cancelling: the run stops after its current step.")
    else:
        messages.error(request, f"The run has already {status}.")
    return redirect("run_detail", run.id)


@login_required
@require_POST
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, manage=True)
    if queueing.resume_run(run):
        messages.success(request, "Queued again: it resumes from its last checkpoint.")
    else:
        problem = queueing.resume_problem(run)
        messages.error(request, problem or "Only failed or cancelled runs trained here can resume.")
    return redirect("run_detail", run.id)
