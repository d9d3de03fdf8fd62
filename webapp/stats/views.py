"""The statistics page of an experiment, its "queue more seeds" action and its JSON twin
`GET /api/v1/experiments/<id>/stats`. The numbers are
`stats_page.experiment_stats`'; these views only lay them out.

Anyone signed in reads the statistics; queueing seeds is the owner's or staff's (`access.py`).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.jsonapi.http import api_view
from webapp.runs.access import can_manage, get_experiment_for_user
from webapp.stats.page import (
    MAX_QUEUE,
    METRIC_NAMES,
    METRICS,
    PAIR_AXES,
    experiment_stats,
    queue_more_seeds,
    seed_list,
)


@login_required
def experiment_stats_page(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id)
    stats = experiment_stats(experiment)
    cells = [
        {
            "axes": [cell[a] for a in PAIR_AXES],
            "n_pairs": cell["n_pairs"],
            "seeds": cell["seeds"],
            "undecided": cell["undecided"] or cell["insufficient"],
            "undecided_on": [METRIC_NAMES[m] for m in cell["undecided_on"]],
            "plan": cell["plan"],
            "effects": [cell[m] for m in METRICS],
        }
        for cell in stats["sharing"]["cells"]
    ]
    main = [
        (axis, [(METRIC_NAMES[m], rows) for m, rows in by_metric.items()])
        for axis, by_metric in stats["main_effects"].items()
    ]
    lead = stats["lead"]
    lead["n_perm_text"] = f"{lead['n_perm']:,}"
    top = max((b["count"] for b in lead["histogram"]), default=0)
    for b in lead["histogram"]:
        b["percent"] = round(100 * b["count"] / top) if top else 0
        b["side"] = "before" if b["low"] > 0 else ("after" if b["high"] < 0 else "mixed")
    context = {
        "experiment": experiment,
        "stats": stats,
        "cells": cells,
        "metric_names": [METRIC_NAMES[m] for m in METRICS],
        "overall": [(METRIC_NAMES[m], stats["sharing"]["overall"][m]) for m in METRICS],
        "main": main,
        "lead": lead,
        "manage": can_manage(request.user, experiment),
        "max_queue": MAX_QUEUE,
    }
    return render(request, "stats/stats.html", context)


@login_required
@require_POST
def experiment_stats_queue(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id, manage=True)
    result = queue_more_seeds(experiment)
    n = len(result["queued"])
    for skipped in result["skipped"]:
        where = " × ".join(str(skipped[a]) for a in PAIR_AXES)
        messages.error(request, f"Nothing queued for {where}: {skipped['reason']}.")
    if n:
        cells = "; ".join(
            f"{' × '.join(str(c[a]) for a in PAIR_AXES)}: {seed_list(c['seeds'])}"
            for c in result["cells"]
        )
        message = f"Queued {n} run{'s' if n != 1 else ''} (both sharing modes) — {cells}."
        if result["capped"]:
            message += (
                f" One press queues at most {MAX_QUEUE} runs; undecided cells wanted "
                f"{result['wanted_runs']}: press again to queue the rest."
            )
        messages.success(request, message)
    elif not result["skipped"]:
        messages.info(
            request,
            "Nothing to queue: no cell is missing seeds (cells that are decided or show no "
            "difference at all get none, and seeds already queued or running count).",
        )
    return redirect("experiment_stats", experiment.id)


@api_view("GET")
def stats_api(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """The statistics page's numbers as JSON (the API's conventions: webapp/jsonapi/http.py)."""
    experiment = get_experiment_for_user(request.user, experiment_id)
    return JsonResponse(experiment_stats(experiment))
