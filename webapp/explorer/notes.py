"""Tags and the Markdown note of a run or an experiment, from the browser: anyone signed in
reads them; the experiment's owner or staff add, change and remove them
(`webapp.runs.access.can_manage`). And the experiments' list to search: by name, owner, tag
and run status, sorted."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from markdown_it import MarkdownIt

from webapp.experiments.models import Experiment, Run
from webapp.explorer import tags as store
from webapp.runs.access import can_manage, get_experiment_for_user, get_run_for_user
from webapp.runs.lifecycle import live_experiments, live_run

# Raw HTML off and links checked (no javascript:): a note is shown to every teammate.
_MARKDOWN = MarkdownIt("js-default")
EXPERIMENT_SORTS = {
    "newest": ("-created", "-id"),
    "oldest": ("created", "id"),
    "name": ("name", "id"),
    "owner": ("owner__username", "name"),
    "runs": ("-n_runs", "-id"),
    "active": ("-last_run", "-id"),
}


def render_note(text: str) -> str:
    return _MARKDOWN.render(text or "")


def _apply(request: HttpRequest, setter, deleter) -> str | None:
    """Carry out the POSTed action (`set`, `delete` or `note`); an error message or None."""
    action = request.POST.get("action")
    try:
        if action == "set":
            setter(request.POST.get("key", "").strip(), request.POST.get("value", ""))
        elif action == "delete":
            deleter(request.POST.get("key", ""))
        elif action == "note":
            note = request.POST.get("note", "")
            if note.strip():
                setter(store.NOTE_TAG, note)
            else:
                deleter(store.NOTE_TAG)
        else:
            return "Choose an action: set, delete or note."
    except store.TagError as error:
        return str(error)
    return None


def _page(request, thing, title, tags, manage, setter, deleter, back):
    if request.method == "POST":
        if not manage:
            raise PermissionDenied("Only the owner of this experiment or staff may change it.")
        error = _apply(request, setter, deleter)
        if error:
            messages.error(request, error)
        return redirect(request.path)
    note = tags.get(store.NOTE_TAG, "")
    context = {
        "thing": thing,
        "title": title,
        "back": back,
        "tags": sorted((k, v) for k, v in tags.items() if k != store.NOTE_TAG),
        "note": note,
        "note_html": render_note(note),
        "manage": manage,
    }
    return render(request, "explorer/notes.html", context)


@login_required
def run_notes(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    return _page(
        request,
        run,
        f"Run {run.id}" + (f" ({run.name})" if run.name else ""),  # not "Run run 1"
        store.run_tags(run),
        can_manage(request.user, run.experiment),
        lambda k, v: store.set_run_tag(run, k, v),
        lambda k: store.delete_run_tag(run, k),
        f"/runs/{run.id}/",
    )


@login_required
def experiment_notes(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, experiment_id)
    return _page(
        request,
        experiment,
        f"Experiment {experiment}",
        store.experiment_tags(experiment),
        can_manage(request.user, experiment),
        lambda k, v: store.set_experiment_tag(experiment, k, v),
        lambda k: store.delete_experiment_tag(experiment, k),
        f"/experiments/{experiment.id}/",
    )


def _filtered(params) -> tuple[object, dict[str, str]]:
    chosen = {k: params.get(k, "").strip() for k in ("q", "owner", "tag", "status", "sort")}
    found = live_experiments(Experiment.objects.select_related("owner", "tracked"))
    if chosen["q"]:
        found = found.filter(Q(name__icontains=chosen["q"]) | Q(description__icontains=chosen["q"]))
    if chosen["owner"]:
        found = found.filter(owner__username=chosen["owner"])
    if chosen["tag"]:
        key, _, value = chosen["tag"].partition("=")
        path = f"tracked__tags__{key.strip()}"
        found = found.filter(**({path: value.strip()} if value else {f"{path}__isnull": False}))
    if chosen["status"] in dict(Run.STATUSES):
        with_status = Run.objects.filter(live_run(), status=chosen["status"])
        found = found.filter(id__in=with_status.values("experiment_id"))
    found = found.annotate(
        n_runs=Count("runs", filter=live_run("runs__"), distinct=True),
        last_run=Max("runs__created"),
    )
    order = EXPERIMENT_SORTS.get(chosen["sort"], EXPERIMENT_SORTS["newest"])
    return found.order_by(*order), chosen


@login_required
def experiment_search(request: HttpRequest) -> HttpResponse:
    found, chosen = _filtered(request.GET)
    page = Paginator(found, 50).get_page(request.GET.get("page"))
    for experiment in page:
        tracked = getattr(experiment, "tracked", None)
        experiment.tag_pairs = sorted(
            (k, v) for k, v in (tracked.tags if tracked else {}).items() if k != store.NOTE_TAG
        )
    owners = (
        live_experiments(Experiment.objects.all())
        .values_list("owner__username", flat=True)
        .distinct()
        .order_by("owner__username")
    )
    context = {
        "page": page,
        "chosen": chosen,
        "owners": owners,
        "statuses": [s for s, _ in Run.STATUSES],
        "sorts": list(EXPERIMENT_SORTS),
    }
    return render(request, "explorer/experiments.html", context)
