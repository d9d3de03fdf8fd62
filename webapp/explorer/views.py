"""The runs explorer's pages: the table (`/explore/`), its CSV, the column chooser's and saved
views' forms, and the JSON the parallel coordinates read. Anyone signed in may read every
run (`webapp.runs.access`); a saved view or a column choice is its user's own."""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import plotly
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from analysis.cliffs import STATUS_WORDS
from webapp.dashboards import seed_bands
from webapp.experiments.models import Experiment
from webapp.explorer import charts
from webapp.explorer.fields import ACCURACY, ATTRIBUTES, ExplorerError, parse_columns
from webapp.explorer.models import ColumnChoice, SavedChart, SavedView
from webapp.explorer.query import Table, explore, is_time
from webapp.explorer.state import State, read_state, split_columns
from webapp.ids import whole_number
from webapp.metrics import metric_keys
from webapp.runs.access import get_experiment_for_user
from webapp.runs.lifecycle import live_experiments

CSV_LIMIT = 10_000  # runs in one export


def _cell(column, value: Any) -> dict[str, Any]:
    """How the template shows one value: its text, and its ms when it is a time; a cliff
    verdict in the words of every other page, its code (what a filter compares) on hover."""
    if value is None:
        return {"text": ""}
    if column.spec == "attributes.cliff_status" and value:
        return {"text": STATUS_WORDS.get(value, value), "title": f"cliff_status = '{value}'"}
    if is_time(column):
        stamp = datetime.fromtimestamp(value / 1000, tz=UTC)
        return {"text": stamp.strftime("%Y-%m-%d %H:%M UTC"), "ms": int(value)}
    if isinstance(value, float):
        return {"text": "" if math.isnan(value) else f"{value:.4g}", "number": True}
    if isinstance(value, int):
        return {"text": str(value), "number": True}
    return {"text": str(value)}


def _headers(state: State) -> list[dict[str, Any]]:
    sort_column, descending = state.sort
    out = []
    for column in state.columns:
        on = column == sort_column
        flip = "ASC" if on and descending else "DESC"
        out.append(
            {
                "spec": column.spec,
                "label": column.name + (f" ({column.aggregate})" if column.aggregate else ""),
                "kind": column.kind,
                "sorted": ("desc" if descending else "asc") if on else "",
                "href": "?" + state.query(sort=f"{column.spec} {flip}", page=1),
            }
        )
    return out


def _rows(table: Table) -> list[dict[str, Any]]:
    return [
        {
            "id": row["id"],
            "experiment_id": row["experiment_id"],
            "cells": [_cell(c, v) for c, v in zip(table.columns, row["values"], strict=True)],
        }
        for row in table.rows
    ]


@login_required
def runs_page(request: HttpRequest) -> HttpResponse:
    error, table, state = "", None, None
    try:
        state = read_state(request.GET, request.user)
        table = explore(state.filter, state.columns, state.sort, state.page)
    except ExplorerError as e:
        error = str(e)
    if state is None:  # a bad column or sort: show the defaults with the message
        fallback = QueryDict(mutable=True)
        fallback["q"] = request.GET.get("q", "")
        fallback["brush"] = request.GET.get("brush", "")
        state = read_state(fallback, request.user)
    keys = metric_keys(table.run_ids[:20]) if table else {}
    context = {
        "state": state,
        "error": error,
        "table": table,
        "headers": _headers(state),
        "rows": _rows(table) if table else [],
        "views": SavedView.objects.filter(owner=request.user),
        "attributes": ATTRIBUTES,
        "metric_keys": sorted({ACCURACY, *(k for ks in keys.values() for k in ks)}),
        "cols_text": ",".join(c.spec for c in state.columns),
        "unbrushed": "?" + state.query(brush="", page=1),
        "prev": "?" + state.query(page=state.page - 1) if table and state.page > 1 else "",
        "next": "?" + state.query(page=state.page + 1)
        if table and state.page < table.pages
        else "",
    }
    return render(request, "explorer/runs.html", context, status=400 if error else 200)


@login_required
def runs_csv(request: HttpRequest) -> HttpResponse:
    """The table as CSV: its columns in its order; this page's rows, or every match
    (`all=1`, up to CSV_LIMIT)."""
    try:
        state = read_state(request.GET, request.user)
        everything = request.GET.get("all") == "1"
        size = CSV_LIMIT if everything else 50
        table = explore(
            state.filter, state.columns, state.sort, 1 if everything else state.page, size
        )
    except ExplorerError as e:
        return HttpResponseBadRequest(str(e), content_type="text/plain")
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="runs.csv"'
    writer = csv.writer(response)
    writer.writerow(["run", *(c.spec for c in table.columns)])
    for row in table.rows:
        writer.writerow([row["id"], *("" if v is None else v for v in row["values"])])
    return response


@login_required
@require_POST
def choose_columns(request: HttpRequest) -> HttpResponse:
    """Remember the user's columns, then show the table with them."""
    raw = request.POST.get("cols", "")
    try:
        columns = parse_columns(split_columns(raw))
    except ExplorerError as e:
        messages.error(request, str(e))
        return redirect("explorer")
    ColumnChoice.objects.update_or_create(
        user=request.user, defaults={"columns": [c.spec for c in columns]}
    )
    back = request.POST.get("back", "")
    state = read_state(QueryDict(back), request.user)
    return redirect(f"/explore/?{state.query(cols=','.join(c.spec for c in columns))}")


@login_required
@require_POST
def save_view(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()[:100]
    query = request.POST.get("query", "")[:6000]
    if not name:
        messages.error(request, "Give the view a name to save it under.")
        return redirect(f"/explore/?{query}")
    SavedView.objects.update_or_create(owner=request.user, name=name, defaults={"query": query})
    messages.success(request, f"Saved the view “{name}”.")
    return redirect(f"/explore/?{query}")


@login_required
@require_POST
def delete_view(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(SavedView, id=view_id, owner=request.user)
    view.delete()
    return redirect("explorer")


@login_required
def runs_json(request: HttpRequest) -> JsonResponse:
    """The matching runs' values of the asked columns (`cols`), in the table's order, for the
    parallel coordinates: every match (among `runs`, ids, when given) up to CSV_LIMIT."""
    try:
        state = read_state(request.GET, request.user)
        only = None
        if request.GET.get("runs"):
            only = [n for i in request.GET["runs"].split(",") if (n := whole_number(i)) is not None]
        table = explore(state.filter, state.columns, state.sort, 1, CSV_LIMIT, only)
    except ExplorerError as e:
        return JsonResponse({"error": str(e)}, status=400)
    return JsonResponse(
        {
            "columns": [c.spec for c in table.columns],
            "runs": [row["id"] for row in table.rows],
            "values": [[_json(v) for v in row["values"]] for row in table.rows],
        }
    )


def _json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@login_required
def plotly_js(request: HttpRequest) -> FileResponse:
    """plotly.js from the installed plotly package, for the parallel coordinates: served
    here, as Dash serves its own, since many clusters reach no CDN."""
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    response = FileResponse(path.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "private, max-age=86400"
    return response


@login_required
def chart_page(request: HttpRequest) -> HttpResponse:
    """The chart builder: the chart of the query string's choices, and the form to change
    or save it."""
    error, spec, fig = "", None, None
    if request.GET.get("runs"):
        try:
            spec = charts.read_spec(request.GET)
            fig = charts.figure(spec).to_json()
        except ExplorerError as e:
            error = str(e)
    context = {
        "spec": spec or {"runs": [], "key": ACCURACY, "by": "attributes.sharing"},
        "runs_text": request.GET.get("runs", ""),
        "figure": fig,
        "error": error,
        "smoothing": seed_bands.SMOOTHING,
        "scales": seed_bands.SCALES,
        "x_axes": charts.X_AXES,
        "panel": charts.panel_link(spec) if spec else None,
        "experiments": _manageable(request.user),
    }
    return render(request, "explorer/chart.html", context, status=400 if error else 200)


def _manageable(user):
    found = live_experiments(Experiment.objects.all()).order_by("-created")
    return found if user.is_staff else found.filter(owner=user)


@login_required
@require_POST
def save_chart(request: HttpRequest) -> HttpResponse:
    """Keep the chart on an experiment the user owns (or any, for staff)."""
    query = request.POST.get("query", "")
    try:
        spec = charts.read_spec(QueryDict(query))
        experiment = get_experiment_for_user(
            request.user, int(request.POST.get("experiment", "0") or 0), manage=True
        )
    except (ExplorerError, ValueError) as e:
        messages.error(request, str(e))
        return redirect(f"/explore/chart/?{query}")
    title = request.POST.get("title", "").strip()[:200] or spec["key"]
    SavedChart.objects.create(experiment=experiment, owner=request.user, title=title, spec=spec)
    messages.success(request, f"Saved “{title}” on {experiment.name}.")
    return redirect(f"/experiments/{experiment.id}/")


@login_required
@require_POST
def delete_chart(request: HttpRequest, chart_id: int) -> HttpResponse:
    chart = get_object_or_404(SavedChart, id=chart_id)
    get_experiment_for_user(request.user, chart.experiment_id, manage=True)
    chart.delete()
    return redirect(f"/experiments/{chart.experiment_id}/")
